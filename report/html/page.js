// perfscope's report page: copy buttons, flame graph frames sized to
// their content, every <details> opened for printing. Nothing is fetched.
(function () {
  "use strict";
  function copyText(text, button) {
    function done(ok) {
      button.textContent = ok ? "Copied" : "Select and copy";
      setTimeout(function () { button.textContent = "Copy"; }, 1500);
    }
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(function () { done(true); }, function () { done(fallback(text)); });
    } else {
      done(fallback(text));
    }
  }
  // Pages opened from a file are not a secure context everywhere: copy
  // through a selected, hidden text area instead.
  function fallback(text) {
    var ta = document.createElement("textarea");
    ta.value = text;
    ta.setAttribute("readonly", "");
    ta.style.position = "absolute";
    ta.style.left = "-9999px";
    document.body.appendChild(ta);
    ta.select();
    var ok = false;
    try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
    document.body.removeChild(ta);
    return ok;
  }
  document.querySelectorAll("button.copy").forEach(function (b) {
    b.addEventListener("click", function () {
      var pre = b.closest(".cmd").querySelector("pre");
      copyText(pre.textContent, b);
    });
  });
  function fit(frame) {
    try {
      var d = frame.contentDocument;
      if (d && d.body) {
        // How many frames the flame graph drew: a reader (and the
        // browser test) can tell a graph that ran from an empty frame.
        frame.setAttribute("data-frames", String(d.querySelectorAll("#flamegraph g").length));
        frame.style.height = Math.min(Math.max(d.documentElement.scrollHeight + 4, 200), 2400) + "px";
      }
    } catch (e) { /* a browser that keeps srcdoc frames apart: keep the CSS height */ }
  }
  document.querySelectorAll(".flame iframe").forEach(function (f) {
    f.addEventListener("load", function () { fit(f); });
    fit(f);
  });
  window.addEventListener("beforeprint", function () {
    document.querySelectorAll("details").forEach(function (d) { d.open = true; });
  });
  document.documentElement.setAttribute("data-ready", "1");
})();
