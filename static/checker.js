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
  // The table of loops lists the combinations, each row's id "loop-" and its key; the data holds
  // their results in the rows' order (checker.py: page_data).
  var ROWS = Array.from(document.querySelectorAll("#loops tbody tr"));
  var COMBOS = ROWS.map(function (row) { return row.id.slice(5); });
  // A key joins the four answers with "-"; only the reach "lstm-both" holds one itself.
  var KEYS = COMBOS.map(function (k) {
    var a = k.split("-");
    return a.length > 4 ? [a[0], a[1], a[2] + "-" + a[3], a[4]] : a;
  });
  var BY_ANSWERS = {};  // the answers, joined by " ", to the combination's row number
  KEYS.forEach(function (answers, i) { BY_ANSWERS[answers.join(" ")] = i; });

  function text(i) { return data.strings[i]; }
  // A sentence stored in pieces: string indices separated by spaces, joined as they are (or,
  // for a fix's edits, by glue).
  function joined(s, glue) { return s.split(" ").map(text).join(glue || ""); }
  // A label or a verdict begins with a capital (checker.py stores what the tried changes share).
  function cap(s) { return s[0].toUpperCase() + s.slice(1); }

  var INPUTS = {};
  NAMES.forEach(function (n) {
    INPUTS[n] = Array.from(form.querySelectorAll("input[name='" + n + "']"));
  });

  // What only the script can say: that a question is unanswered, and why its options are greyed.
  var NOTES = {};
  NAMES.forEach(function (n) {
    var set = document.getElementById("q-" + n);
    NOTES[n] = [el("p", "unanswered"), el("p", "hint")];
    NOTES[n][0].append(el("strong", null, "Not answered yet."));
    NOTES[n][0].id = "unanswered-" + n;
    NOTES[n][1].id = "greyed-" + n;
    set.querySelector("legend").after(NOTES[n][0]);
    set.append(NOTES[n][1]);
  });

  // The checked option of a question, or undefined.
  function picked(n) { return INPUTS[n].filter(function (x) { return x.checked; })[0]; }

  function answers() {
    return NAMES.map(function (n) { return picked(n) ? picked(n).value : null; });
  }

  // The values question i can take, given the answers to questions 0..upto (all before i when
  // upto is missing); null while one of those is missing.
  function allowed(chosen, i, upto) {
    if (upto === undefined) upto = i - 1;
    for (var j = 0; j <= upto; j++) if (chosen[j] === null || chosen[j] === OTHER) return null;
    var found = {};
    KEYS.forEach(function (key) {
      for (var j = 0; j <= upto; j++) if (key[j] !== chosen[j]) return;
      found[key[i]] = true;
    });
    return found;
  }

  // "your answer to question 2, “One backward()”"
  function yours(j) {
    var label = picked(NAMES[j]).parentNode.textContent.trim();
    return "your answer to question " + (j + 1) + ", \u201c" + label + "\u201d";
  }

  // Grey out what cannot occur, saying why (a title on hover, the question's note, tied to each
  // greyed option by aria-describedby); drop answers that no longer can be and fill in a single
  // choice, adding what it did to `said`; return the answers left.
  function constrain(said) {
    var chosen = answers();
    NAMES.forEach(function (n, i) {
      var ok = allowed(chosen, i);
      var prefix = [];  // allowed(chosen, i, j), computed once per j
      var open = [];
      var by = [];
      var greyed = NOTES[n][1];
      INPUTS[n].forEach(function (input) {
        var possible = input.value === OTHER || ok === null || ok[input.value] === true;
        var j = 0;  // the first answer that rules it out, with those before it
        while (!possible && (prefix[j] = prefix[j] || allowed(chosen, i, j))[input.value]) j++;
        var why = possible ? "" : yours(j);
        // written only when changed: a frame re-styles only what changed
        var tip = possible ? "" : "Not offered with " + why + ".";
        if (input.parentNode.title !== tip) input.parentNode.title = tip;
        if (input.disabled !== !possible) {
          input.disabled = !possible;
          if (possible) input.removeAttribute("aria-describedby");
          else input.setAttribute("aria-describedby", greyed.id);
        }
        if (!possible && by.indexOf(why) < 0) by.push(why);
        if (!possible && input.checked) {
          said.push("Cleared " + yours(i) + ": it is not offered with " + why + ".");
          input.checked = false;
        }
        if (possible && input.value !== OTHER) open.push(input);
      });
      var words = by.length ? "Greyed: not offered with " + by.join(" or ") + "." : "";
      if (greyed.textContent !== words) greyed.textContent = words;
      greyed.hidden = !words;
      if (ok !== null && open.length === 1 && answers()[i] === null) {
        open[0].checked = true;
        said.push("Filled in " + yours(i) + ": the only option offered with your earlier answers.");
      }
      chosen = answers();
    });
    return chosen;
  }

  // Mark each unanswered question that a later answer follows, or that alone is left; return
  // their numbers.
  function markMissing(chosen) {
    var last = -1;
    chosen.forEach(function (answer, i) { if (answer !== null) last = i; });
    var left = chosen.filter(function (answer) { return answer === null; }).length;
    var missing = [];
    NAMES.forEach(function (n, i) {
      var marked = chosen[i] === null && (i < last || left === 1) && chosen.indexOf(OTHER) < 0;
      NOTES[n][0].hidden = !marked;
      if (marked) missing.push(i + 1);
    });
    return missing;
  }

  function el(tag, cls, words) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (words != null) node.textContent = words;  // undefined or null: no text
    return node;
  }

  function showTemplate(id, cls) {
    out.className = cls;
    out.replaceChildren(document.getElementById(id).content.cloneNode(true));
  }

  // What the form changed by itself, said first in the live region.
  function sayFirst(lines) {
    out.prepend(...lines.map(function (words) { return el("p", "said", words); }));
  }

  // A diff (checker.py encode_diff): each line a sign, "=" kept, "-" removed, "+" added, and
  // its string's index, left out for the index after the line before's; "@" a gap between hunks.
  // Each line hangs at its own indentation, so wrapped code keeps its shape on a phone.
  function diff(encoded) {
    var pre = el("pre", "diff");
    pre.setAttribute("aria-label", "The change: lines starting - are removed, + are added");
    var code = el("code");
    var last = -1;
    encoded.match(/@|[-+=]\d*/g).forEach(function (token) {
      if (token === "@") return code.append(el("span", "gap", "\u22ef\n"));
      var sign = token[0];
      last = token.length > 1 ? Number(token.slice(1)) : last + 1;
      var line = text(last);
      var node = el("span", sign === "-" ? "del" : sign === "+" ? "ins" : "ctx",
        (sign === "=" ? " " : sign) + " " + line + "\n");
      var hang = line.length - line.replace(/^ +/, "").length + 2;
      node.style.paddingLeft = hang + "ch";
      node.style.textIndent = -hang + "ch";
      code.append(node);
    });
    pre.append(code);
    return pre;
  }

  function link(parent, target, words) {
    if (parent.childNodes.length) parent.append(" · ");
    var a = el("a", null, words);
    a.href = target;
    parent.append(a);
  }

  // A result is [note, section, blocks, tried changes]; a block is [kind, label, verdict, fix,
  // diff, fixed]; a tried change [label, verdict, diff] (checker.py: RESULT, BLOCK, TRIED). Its
  // kind is its blocks' one kind, or "mixed".
  function show(i) {
    var r = data.results[i];
    var key = COMBOS[i];
    var kinds = r[2].map(function (b) { return b[0]; });
    var box = document.createDocumentFragment();
    // The headline is the one the table of loops shows for this combination.
    var head = el("h3", null, ROWS[i].cells[1].textContent);
    head.tabIndex = -1;
    box.append(head);
    if (r[0] !== null) box.append(el("p", "note", text(r[0])));
    r[2].forEach(function (b) {
      var part = el("div", "variant " + b[0]);
      if (b[1] !== "") part.append(el("h4", null, cap(joined(b[1])) + ":"));
      if (b[2] !== "") part.append(el("p", null, cap(joined(b[2])) + "."));
      if (b[3] !== "") {
        part.append(el("p", "fix", "Fix: " + joined(b[3], "; ") + "."),
          diff(b[4]), el("p", "fixed", text(b[5])));
      }
      box.append(part);
    });
    if (r[3].length) {
      var tried = el("div", "tried");
      var items = el("ul");
      r[3].forEach(function (t) {
        var li = el("li");
        li.append(el("strong", null, text(t[0]) + ":"), " " + joined(t[1]) + ".", diff(t[2]));
        items.append(li);
      });
      tried.append(el("h4", null, "What people try instead, and what it did"), items);
      box.append(tried);
    }
    var links = el("p");
    link(links, "#" + r[1], "Read the explanation");
    link(links, "#loop-" + key, "See it in the table");
    link(links, "#diagnoser", "Run the diagnoser on your script");
    box.append(links);
    out.className = kinds.every(function (k) { return k === kinds[0]; }) ? kinds[0] : "mixed";
    out.replaceChildren(box);
  }

  function render() {
    var said = [];
    var chosen = constrain(said);
    var missing = markMissing(chosen);
    var row = BY_ANSWERS[chosen.join(" ")];
    if (chosen.indexOf(OTHER) >= 0) showTemplate("checker-other", "other");
    else if (chosen.indexOf(null) < 0 && row !== undefined) show(row);
    else if (missing.length) {
      showTemplate("checker-missing", "");
      out.querySelector(".which").textContent =
        (missing.length > 1 ? "questions " : "question ") + missing.join(" and ");
    } else showTemplate("checker-start", "");
    sayFirst(said);
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
    var raw = location.hash.slice(1);
    if (raw.indexOf("=") < 0) {
      if (raw.length === 0) render();
      return;  // an anchor to a section leaves the checker as it is
    }
    var params = new URLSearchParams(raw);
    NAMES.forEach(function (n) {
      var answer = params.get(n);
      INPUTS[n].forEach(function (input) { input.checked = input.value === answer; });
    });
    render();
    if (out.querySelector("h3")) reveal();
  }


  // Each row of the table of loops opens its combination in the checker.
  ROWS.forEach(function (row, i) {
    var cell = row.cells[0];
    var a = el("a", null, cell.textContent);
    a.href = "#" + fragmentOf(KEYS[i]);
    cell.replaceChildren(a);
  });

  form.addEventListener("change", function () {
    render();
    if (out.querySelector("h3")) reveal();
    var fragment = "#" + fragmentOf(answers());
    // one history entry for the whole form: Back leaves the checker in one press
    if (location.hash !== fragment) history.replaceState(null, "", fragment);
  });
  form.addEventListener("submit", function (event) { event.preventDefault(); });
  window.addEventListener("hashchange", applyHash);
  window.addEventListener("popstate", applyHash);
  if (location.hash.indexOf("=") >= 0) applyHash();
  else render();
})();
