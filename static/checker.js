// The checker: looks up the captured result of the loop matching the four answers.
// Nothing here decides an outcome; every sentence comes from the checker-data block.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("checker-data").textContent);
  var form = document.getElementById("checker");
  var out = document.getElementById("result");
  var NAMES = ["calls", "retain", "carried", "summed"];
  var ALLOWED = { calls: ["1", "2"], retain: ["no", "yes"], carried: ["no", "yes"], summed: ["no", "yes"] };

  function text(i) { return i === null ? null : data.strings[i]; }

  function keyOf(answers) {
    return NAMES.map(function (n) { return answers[n].charAt(0); }).join("");
  }

  function answersOf(key) {
    var answers = {};
    NAMES.forEach(function (n, i) {
      var c = key.charAt(i);
      answers[n] = ALLOWED[n].filter(function (v) { return v.charAt(0) === c; })[0];
    });
    return answers;
  }

  function fragmentOf(answers) {
    return NAMES.map(function (n) { return n + "=" + answers[n]; }).join("&");
  }

  // A fragment with '=' is a checker fragment; anything invalid in it gives the default.
  function parseFragment(hash) {
    var raw = hash.replace(/^#/, "");
    if (raw.indexOf("=") < 0) return null;
    var params = new URLSearchParams(raw);
    var answers = {};
    var ok = NAMES.every(function (n) {
      answers[n] = params.get(n);
      return ALLOWED[n].indexOf(answers[n]) >= 0;
    });
    return ok ? keyOf(answers) : data["default"];
  }

  function readForm() {
    var answers = {};
    NAMES.forEach(function (n) {
      var checked = form.querySelector("input[name='" + n + "']:checked");
      answers[n] = checked ? checked.value : ALLOWED[n][0];
    });
    return keyOf(answers);
  }

  function setForm(key) {
    var answers = answersOf(key);
    NAMES.forEach(function (n) {
      form.querySelector("input[name='" + n + "'][value='" + answers[n] + "']").checked = true;
    });
  }

  function el(tag, className, content) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (content !== undefined && content !== null) node.textContent = content;
    return node;
  }

  function entry(list, term, value, className) {
    if (value === null) return;
    list.appendChild(el("dt", null, term));
    list.appendChild(el("dd", className, value));
  }

  function show(key) {
    var r = data.results[key];
    var box = document.createDocumentFragment();
    box.appendChild(el("h3", null, text(r.headline)));
    var list = el("dl");
    entry(list, "What it did", text(r.outcome));
    entry(list, "Where it raised", text(r.where));
    entry(list, "The exact text", text(r.message), "text");
    entry(list, "Anomaly mode points at", text(r.anomaly), "text");
    entry(list, "The fix", text(r.fix));
    box.appendChild(list);
    var pre = el("pre", "diff");
    pre.setAttribute("aria-label", "The loop, with the fix: lines starting - are removed, + are added");
    var code = el("code");
    r.diff.forEach(function (line) {
      var cls = line[0] === "-" ? "del" : line[0] === "+" ? "ins" : "ctx";
      code.appendChild(el("span", cls, line[0] + " " + text(line[1]) + "\n"));
    });
    pre.appendChild(code);
    box.appendChild(pre);
    box.appendChild(el("p", null, text(r.fixed)));
    var links = el("p");
    var cause = el("a", null, "Read the explanation");
    cause.href = "#" + r.section;
    var row = el("a", null, "See this loop in the table");
    row.href = "#loop-" + key;
    links.appendChild(cause);
    links.appendChild(document.createTextNode(" · "));
    links.appendChild(row);
    box.appendChild(links);
    out.className = r.kind;
    out.replaceChildren(box);
  }

  function applyHash() {
    var key = parseFragment(location.hash);
    if (key === null && location.hash.length > 1) return;  // an anchor to a section
    if (key === null) key = data["default"];
    setForm(key);
    show(key);
  }

  form.addEventListener("change", function () {
    var key = readForm();
    show(key);
    var fragment = "#" + fragmentOf(answersOf(key));
    if (location.hash !== fragment) history.pushState(null, "", fragment);
  });
  form.addEventListener("submit", function (event) { event.preventDefault(); });
  window.addEventListener("hashchange", applyHash);
  window.addEventListener("popstate", applyHash);

  var initial = parseFragment(location.hash);
  setForm(initial === null ? data["default"] : initial);
  show(readForm());
})();
