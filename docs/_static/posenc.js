// A table wider than the page scrolls inside its frame (the theme's); this says so: a line
// above it ("scrolls sideways") and a shade on the side where more columns are, kept up to
// date as the reader scrolls or the window changes width.
(function () {
  'use strict';
  function cue(frame) {
    var note = document.createElement('p');
    note.className = 'posenc-cue';
    note.textContent = '⇆ This table scrolls sideways: more columns to the right.';
    frame.parentNode.insertBefore(note, frame);
    function update() {
      var more = frame.scrollWidth - frame.clientWidth;
      note.hidden = more <= 1;
      frame.toggleAttribute('data-more-right', frame.scrollLeft < more - 1);
      frame.toggleAttribute('data-more-left', frame.scrollLeft > 1);
    }
    frame.addEventListener('scroll', update, {passive: true});
    window.addEventListener('resize', update);
    update();
  }
  function start() {
    document.querySelectorAll('.bd-article .pst-scrollable-table-container').forEach(cue);
  }
  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', start);
  } else {
    start();
  }
}());
