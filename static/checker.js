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
  // A key joins the four answers with "-"; only the reach "lstm-both" holds one itself.
  var KEYS = Object.keys(data.results).map(function (k) {
    var a = k.split("-");
    return a.length > 4 ? [a[0], a[1], a[2] + "-" + a[3], a[4]] : a;
  });
  var BY_ANSWERS = {};
  Object.keys(data.results).forEach(function (k, i) { BY_ANSWERS[KEYS[i].join(" ")] = k; });

  function text(i) { return i === null ? null : data.strings[i]; }
  // A sentence stored in pieces: string indices separated by spaces, joined as they are.
  function joined(s) { return s === "" ? null : s.split(" ").map(function (i) { return data.strings[i]; }).join(""); }

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

  // A diff: tokens are string indices, "-" removed, "+" added, "@" a gap between hunks.
  // Each line hangs at its own indentation, so wrapped code keeps its shape on a phone.
  function diff(tokens, label) {
    var pre = el("pre", "diff");
    pre.setAttribute("aria-label", label);
    var code = el("code");
    tokens.split(" ").forEach(function (token) {
      if (token === "@") return code.appendChild(el("span", "gap", "\u22ef\n"));
      var sign = token[0] === "-" || token[0] === "+" ? token[0] : " ";
      var line = text(Number(sign === " " ? token : token.slice(1)));
      var node = el("span", sign === "-" ? "del" : sign === "+" ? "ins" : "ctx", sign + " " + line + "\n");
      var hang = line.length - line.replace(/^ +/, "").length + 2;
      node.style.paddingLeft = hang + "ch";
      node.style.textIndent = -hang + "ch";
      code.appendChild(node);
    });
    pre.appendChild(code);
    return pre;
  }

  function link(parent, href, words) {
    if (parent.childNodes.length) parent.appendChild(document.createTextNode(" · "));
    var a = el("a", null, words);
    a.href = href;
    parent.appendChild(a);
  }

  function show(key) {
    var r = data.results[key];
    var box = document.createDocumentFragment();
    // The headline is the one the table of loops shows for this combination.
    var head = el("h3", null, document.getElementById("loop-" + key).cells[1].textContent);
    head.tabIndex = -1;
    box.appendChild(head);
    if (r.n !== null) box.appendChild(el("p", "note", text(r.n)));
    r.b.forEach(function (b) {
      var part = el("div", "variant " + b.k);
      if (b.l !== "") part.appendChild(el("h4", null, joined(b.l)));
      if (b.v !== "") part.appendChild(el("p", null, joined(b.v)));
      if (b.f !== "") {
        part.appendChild(el("p", "fix", joined(b.f)));
        part.appendChild(diff(b.d, "The change: lines starting - are removed, + are added"));
        part.appendChild(el("p", "fixed", text(b.x)));
      }
      var list = el("dl");
      entry(list, "The exact text", joined(b.m), "text");
      part.appendChild(list);
      box.appendChild(part);
    });
    if (r.t.length) {
      var tried = el("div", "tried");
      tried.appendChild(el("h4", null, "What people try instead, run"));
      var items = el("ul");
      r.t.forEach(function (t) {
        var li = el("li");
        li.appendChild(el("strong", null, text(t.l)));
        li.appendChild(document.createTextNode(" " + joined(t.v)));
        li.appendChild(diff(t.d, "The change tried: lines starting - are removed, + are added"));
        items.appendChild(li);
      });
      tried.appendChild(items);
      box.appendChild(tried);
    }
    var links = el("p");
    link(links, "#" + r.s, "Read the explanation");
    link(links, "#loop-" + key, "See it in the table");
    link(links, "#diagnoser", "Run the diagnoser on your script");
    box.appendChild(links);
    out.className = r.kind;
    out.replaceChildren(box);
  }

  function render() {
    var chosen = constrain();
    if (chosen.indexOf(OTHER) >= 0) return showTemplate("checker-other", "other");
    var key = BY_ANSWERS[chosen.join(" ")];
    if (chosen.indexOf(null) < 0 && key) return show(key);
    showTemplate("checker-start", "");
  }

  function fragmentOf(chosen) {
    var parts = [];
    NAMES.forEach(function (n, i) { if (chosen[i] !== null) parts.push(n + "=" + chosen[i]); });
    return parts.join("&");
  }

  // Bring a new result into view when it lies outside the window (a phone, a preset below it).
  function reveal() {
    var top = out.getBoundingClientRect().top;
    if (top < 0 || top > window.innerHeight - 80) out.scrollIntoView({ block: "start" });
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
    if (out.querySelector("h3")) reveal();
  }


  // Each row of the table of loops opens its combination in the checker.
  Object.keys(data.results).forEach(function (key, i) {
    var cell = document.getElementById("loop-" + key).cells[0];
    var a = el("a", null, cell.textContent);
    a.href = "#" + fragmentOf(KEYS[i]);
    cell.replaceChildren(a);
  });

  form.addEventListener("change", function () {
    render();
    if (out.querySelector("h3")) reveal();
    var fragment = "#" + fragmentOf(answers());
    if (location.hash !== fragment) history.pushState(null, "", fragment);
  });
  form.addEventListener("submit", function (event) { event.preventDefault(); });
  window.addEventListener("hashchange", applyHash);
  window.addEventListener("popstate", applyHash);
  if (location.hash.indexOf("=") >= 0) applyHash();
  else render();
})();
