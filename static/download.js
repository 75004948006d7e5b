// The diagnoser's download link: a file made in the page from the source shown above it, so
// the page holds one copy of diagnose.py. Without JavaScript the source can still be copied.
(function () {
  "use strict";
  var code = document.getElementById("diagnose-source");
  var slot = document.getElementById("diagnose-download");
  if (!code || !slot) return;
  var link = document.createElement("a");
  link.textContent = "Download diagnose.py";
  link.download = "diagnose.py";
  link.href = URL.createObjectURL(new Blob([code.textContent], { type: "text/x-python" }));
  slot.appendChild(link);
})();
