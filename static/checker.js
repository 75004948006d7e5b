// The checker: looks up the captured result of the loop matching the four answers.
// Nothing here decides an outcome; every sentence comes from the checker-data block or the
// page's own templates, and captured text is only ever set as textContent.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("checker-data").textContent);
  var form = document.getElementById("checker");
  var out = document.getElementById("result");
  var NAMES = data.names;
  var OTHER = "other";
  var KEYS = Object.keys(data.results).map(function (k) { return k.split("-"); });

  function text(i) { return i === null ? null : data.strings[i]; }

  var INPUTS = {};
  NAMES.forEach(function (n) {
    INPUTS[n] = Array.prototype.slice.call(form.querySelectorAll("input[name='" + n + "']"));
  });

  function inputs(name) { return INPUTS[name]; }

  function answers() {
    return NAMES.map(function (n) {
      for (var i = 0; i < INPUTS[n].length; i++) if (INPUTS[n][i].checked) return INPUTS[n][i].value;
      return null;
    });
  }

  // The values question i can take, given the answers before it; null while one is missing.
  function allowed(chosen, i) {
    for (var j = 0; j < i; j++) if (chosen[j] === null || chosen[j] === OTHER) return null;
    var found = {};
    KEYS.forEach(function (key) {
      for (var j = 0; j < i; j++) if (key[j] !== chosen[j]) return;
      found[key[i]] = true;
    });
    return found;
  }

  // Grey out what cannot occur; drop answers that no longer can; fill in a single choice.
  function constrain() {
    var chosen = answers();
    NAMES.forEach(function (n, i) {
      var ok = allowed(chosen, i);
      var open = [];
      inputs(n).forEach(function (input) {
        var possible = input.value === OTHER || ok === null || ok[input.value] === true;
        input.disabled = !possible;
        if (!possible && input.checked) input.checked = false;
        if (possible && input.value !== OTHER) open.push(input);
      });
      if (ok !== null && open.length === 1 && chosen[i] === null) open[0].checked = true;
      chosen = answers();
    });
    return chosen;
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

  function showTemplate(id, className) {
    out.className = className;
    out.replaceChildren(document.getElementById(id).content.cloneNode(true));
  }

  function show(key) {
    var r = data.results[key];
    var box = document.createDocumentFragment();
    box.appendChild(el("h3", null, text(r.headline)));
    var list = el("dl");
    entry(list, "Where it raised", text(r.where));
    entry(list, "The exact text", text(r.message), "text");
    entry(list, "Anomaly mode points at", text(r.anomaly), "text");
    entry(list, "What it did", text(r.outcome));
    entry(list, "Gradients", text(r.grads));
    entry(list, "The fix", text(r.fix));
    entry(list, "Why not detach it", text(r.tempting));
    box.appendChild(list);
    var pre = el("pre", "diff");
    pre.setAttribute("aria-label", "The loop, with the fix: lines starting - are removed, + are added");
    var code = el("code");
    // Each token is a string index, prefixed "-" for a removed line and "+" for an added one.
    r.diff.split(" ").forEach(function (token) {
      var sign = token[0] === "-" || token[0] === "+" ? token[0] : " ";
      var cls = sign === "-" ? "del" : sign === "+" ? "ins" : "ctx";
      var line = text(Number(sign === " " ? token : token.slice(1)));
      code.appendChild(el("span", cls, sign + " " + line + "\n"));
    });
    pre.appendChild(code);
    box.appendChild(pre);
    box.appendChild(el("p", "fixed", text(r.fixed)));
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

  function render() {
    var chosen = constrain();
    if (chosen.indexOf(OTHER) >= 0) return showTemplate("checker-other", "other");
    var key = chosen.join("-");
    if (chosen.indexOf(null) < 0 && data.results[key]) return show(key);
    showTemplate("checker-start", "");
  }

  function fragmentOf(chosen) {
    var parts = [];
    NAMES.forEach(function (n, i) { if (chosen[i] !== null) parts.push(n + "=" + chosen[i]); });
    return parts.join("&");
  }

  // A fragment with '=' sets the answers it names; values that are not options are ignored.
  function applyHash() {
    var raw = location.hash.replace(/^#/, "");
    if (raw.indexOf("=") < 0) {
      if (raw.length === 0) render();
      return;  // an anchor to a section leaves the checker as it is
    }
    var params = new URLSearchParams(raw);
    NAMES.forEach(function (n) {
      var value = params.get(n);
      inputs(n).forEach(function (input) { input.checked = input.value === value; });
    });
    render();
  }

  form.addEventListener("change", function () {
    render();
    var fragment = "#" + fragmentOf(answers());
    if (location.hash !== fragment) history.pushState(null, "", fragment);
  });
  form.addEventListener("submit", function (event) { event.preventDefault(); });
  window.addEventListener("hashchange", applyHash);
  window.addEventListener("popstate", applyHash);
  if (location.hash.indexOf("=") >= 0) applyHash();
  else render();
})();
