// The leaderboard's pages: pick the view (all tasks, one task, every column), sort by a
// column (its header's button: a click, or Enter or Space from the keyboard; the first press
// puts the best first), pick the reference encoding the verdicts are against, and say when
// a table scrolls sideways. Plain DOM, no library; the pages read without it (the overview,
// in mean-rank order, against the default reference).
(function () {
  'use strict';
  var slice = Array.prototype.slice;
  // The documentation site loads this script in the page's head: start once the page is
  // read.
  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', start);
  } else {
    start();
  }

  function start() {
    // Every table frame that is narrower than its table gets a visible cue above it and a
    // shade on the side where more columns are.
    function cues() {
      slice.call(document.querySelectorAll('.lb .table-wrap')).forEach(function (wrap) {
        var frame = wrap.parentNode;
        if (!frame.classList.contains('table-frame')) {
          frame = document.createElement('div');
          frame.className = 'table-frame';
          wrap.parentNode.insertBefore(frame, wrap);
          frame.appendChild(wrap);
        }
        var cue = frame.previousElementSibling;
        if (!cue || !cue.classList.contains('lb-cue')) {
          cue = document.createElement('p');
          cue.className = 'lb-cue';
          cue.textContent = '⇆ This table scrolls sideways: more columns to the right.';
          frame.parentNode.insertBefore(cue, frame);
        }
        function update() {
          var more = wrap.scrollWidth - wrap.clientWidth;
          cue.hidden = more <= 1;
          frame.toggleAttribute('data-more-right', wrap.scrollLeft < more - 1);
          frame.toggleAttribute('data-more-left', wrap.scrollLeft > 1);
        }
        if (!wrap.dataset.cued) {
          wrap.dataset.cued = '1';
          wrap.addEventListener('scroll', update, {passive: true});
          window.addEventListener('resize', update);
        }
        update();
      });
    }

    var table = document.querySelector('table.leaderboard');
    if (!table) {
      cues();
      return;
    }
    var body = table.tBodies[0];
    var headers = slice.call(table.tHead.rows[0].cells);

    // Which columns each view shows: the overview a score and a verdict per task, a task's
    // view that task's every column, 'all' every column but the overview's compact score.
    var OVERVIEW = {entry: 1, meanrank: 1, score: 1, verdict: 1};
    var TASK = {entry: 1, rank: 1, mean: 1, success: 1, longest: 1, verdict: 1};
    var ALL = {entry: 1, meanrank: 1, rank: 1, mean: 1, success: 1, longest: 1, verdict: 1};

    function shown(cell, view) {
      var col = cell.getAttribute('data-col');
      var task = cell.getAttribute('data-task');
      if (view === 'overview') {
        return col in OVERVIEW;
      }
      if (view === 'all') {
        return col in ALL;
      }
      return col in TASK && (!task || task === view);
    }

    function setView(view) {
      slice.call(table.querySelectorAll('[data-col]')).forEach(function (cell) {
        cell.hidden = !shown(cell, view);
      });
      table.setAttribute('data-view', view);
      cues();
    }

    slice.call(document.querySelectorAll('input[name="lb-view"]')).forEach(function (input) {
      input.addEventListener('change', function () {
        if (input.checked) {
          setView(input.value);
        }
      });
    });

    function key(row, index, type) {
      var value = row.cells[index].getAttribute('data-sort');
      if (type === 'text') {
        return value;
      }
      return value === '' || value === null ? null : parseFloat(value);
    }

    function sortBy(index) {
      var th = headers[index];
      var type = th.getAttribute('data-type');
      var current = th.getAttribute('aria-sort');
      var ascending = current
        ? current !== 'ascending'
        : th.getAttribute('data-first') !== 'descending';
      var rows = slice.call(body.rows).map(function (row, position) {
        return {row: row, key: key(row, index, type), position: position};
      });
      rows.sort(function (a, b) {
        // Missing values go last in either order; ties keep their order.
        if (a.key === null || b.key === null) {
          return (a.key === null) - (b.key === null) || a.position - b.position;
        }
        var order = type === 'text' ? a.key.localeCompare(b.key) : a.key - b.key;
        return (ascending ? order : -order) || a.position - b.position;
      });
      rows.forEach(function (r) {
        body.appendChild(r.row);
      });
      headers.forEach(function (h) {
        h.removeAttribute('aria-sort');
      });
      th.setAttribute('aria-sort', ascending ? 'ascending' : 'descending');
    }

    headers.forEach(function (th, index) {
      var button = th.querySelector('button');
      if (button) {
        button.addEventListener('click', function () {
          sortBy(index);
        });
      }
    });

    var picker = document.getElementById('reference');
    var data = document.getElementById('verdicts');
    if (picker && data) {
      var verdicts = JSON.parse(data.textContent);
      // Best first (as posenc/benchmark/leaderboard/data.py's VERDICT_ORDER); a verdict not named
      // here sorts with 'not separated'.
      var order = {'reference': 0, 'better': 1, 'undecided': 2, 'not separated': 3, 'worse': 4};
      picker.addEventListener('change', function () {
        var reference = picker.value;
        slice.call(body.rows).forEach(function (row) {
          var name = row.getAttribute('data-entry');
          slice.call(row.querySelectorAll('td.verdict')).forEach(function (cell) {
            var task = cell.getAttribute('data-task');
            var against = verdicts[reference] || {};
            var verdict = name === reference ? 'reference'
              : ((against[name] || {})[task] || '–');
            cell.textContent = verdict;
            cell.className = 'verdict ' + verdict.replace(/[^A-Za-z0-9_.-]+/g, '_');
            cell.setAttribute('data-sort', verdict === '–' ? '' : (verdict in order ? order[verdict] : 3));
          });
        });
      });
    }

    var checked = document.querySelector('input[name="lb-view"]:checked');
    setView(checked ? checked.value : 'all');
  }
}());
