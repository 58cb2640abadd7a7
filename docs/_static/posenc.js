// What the site's pages do in the browser, beside the theme:
// - a table wider than the page scrolls inside its frame (the theme's); a line above it
//   says on which side more columns are, and a shade marks that side, kept up to date as
//   the reader scrolls or the window changes width;
// - a code block wraps only between its whitespace-separated tokens (see tokens()), a
//   token longer than a line wherever it must.
(function () {
  'use strict';
  var SIDES = {right: 'to the right', left: 'to the left', both: 'on both sides'};
  function cue(frame) {
    var note = document.createElement('p');
    note.className = 'posenc-cue';
    frame.parentNode.insertBefore(note, frame);
    function update() {
      var more = frame.scrollWidth - frame.clientWidth;
      var right = frame.scrollLeft < more - 1;
      var left = frame.scrollLeft > 1;
      note.hidden = more <= 1;
      note.textContent = '⇆ This table scrolls sideways: more columns ' +
        SIDES[left && right ? 'both' : left ? 'left' : 'right'] + '.';
      frame.toggleAttribute('data-more-right', right);
      frame.toggleAttribute('data-more-left', left);
    }
    frame.addEventListener('scroll', update, {passive: true});
    window.addEventListener('resize', update);
    update();
  }
  // A code block wraps at the page's width (posenc.css), and left to itself the browser
  // breaks a command inside a token too: after a hyphen (`--⏎config=…`), or anywhere
  // (`overflow-wrap: anywhere`); no CSS property limits breaks to spaces. So each run of
  // non-whitespace becomes a <span class="posenc-token">, an inline-block: lines break only
  // at the whitespace between tokens. An inline-block longer than a line would still start
  // a line of its own, leaving its indentation alone on the line above; fit() makes such a
  // token inline text that breaks at any character, as a terminal wraps it. Only elements
  // are added: the text, and so what a copy gives (the copy button's or a selection's), is
  // unchanged. A token may cross the highlighter's spans (`--` and `config`): each piece
  // keeps shallow copies of the spans it was in, so its colours stay.
  function tokens(pre) {
    var pieces = [];
    (function walk(node, chain) {
      node.childNodes.forEach(function (child) {
        if (child.nodeType === Node.TEXT_NODE) {
          pieces.push({text: child.data, chain: chain});
        } else if (child.nodeType === Node.ELEMENT_NODE) {
          walk(child, chain.concat([child]));
        }
      });
    }(pre, []));
    var out = document.createDocumentFragment();
    var made = [];
    var token = null;
    function add(parent, text, chain) {
      var node = document.createTextNode(text);
      for (var i = chain.length - 1; i >= 0; i--) {
        var copy = chain[i].cloneNode(false);
        copy.appendChild(node);
        node = copy;
      }
      parent.appendChild(node);
    }
    pieces.forEach(function (piece) {
      piece.text.split(/(\s+)/).forEach(function (part) {
        if (!part) {
          return;
        }
        if (/^\s/.test(part)) {
          token = null;
          add(out, part, piece.chain);
          return;
        }
        if (!token) {
          token = document.createElement('span');
          token.className = 'posenc-token';
          made.push(token);
          out.appendChild(token);
        }
        add(token, part, piece.chain);
      });
    });
    pre.replaceChildren(out);
    return {pre: pre, tokens: made};
  }
  // Marks long the tokens that take more than one line as inline-blocks (no wider than the
  // block); every height is read before any token is marked, so the page is laid out once.
  function fit(blocks) {
    blocks.forEach(function (block) {
      block.tokens.forEach(function (t) { t.classList.remove('posenc-long'); });
    });
    var long = [];
    blocks.forEach(function (block) {
      var style = getComputedStyle(block.pre);
      var line = parseFloat(style.lineHeight) || 1.2 * parseFloat(style.fontSize);
      block.tokens.forEach(function (t) {
        if (t.offsetHeight > 1.5 * line) {
          long.push(t);
        }
      });
    });
    long.forEach(function (t) { t.classList.add('posenc-long'); });
  }
  function start() {
    document.querySelectorAll('.bd-article .pst-scrollable-table-container').forEach(cue);
    var blocks = [].map.call(document.querySelectorAll('.bd-article div.highlight pre'), tokens);
    var pending = false;
    function refit() {
      if (!pending) {
        pending = true;
        requestAnimationFrame(function () {
          pending = false;
          fit(blocks);
        });
      }
    }
    fit(blocks);
    window.addEventListener('resize', refit);
    // The page's fonts may change the widths once loaded.
    window.addEventListener('load', refit);
  }
  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', start);
  } else {
    start();
  }
}());
