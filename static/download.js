// The diagnoser's fetch command: the link's text becomes diagnose.py's full address, from this
// page's own location (text only), and the note that asks the reader to copy it goes.
(function () {
  "use strict";
  var link = document.getElementById("tool-url");
  var hint = document.getElementById("tool-hint");
  if (!link) return;
  link.textContent = new URL(link.getAttribute("href"), location.href).href;
  if (hint) hint.hidden = true;
})();
