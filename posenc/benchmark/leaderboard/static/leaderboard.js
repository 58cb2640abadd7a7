// The leaderboard's pages: pick the view (all tasks, one task, every column), sort by a
// column (its header's button: a click, or Enter or Space from the keyboard; the first press
// puts the best first), pick the reference encoding the verdicts are against, and say when
// a table scrolls sideways. The view, sort and reference are kept in the address's fragment
// (#view=flip_flop&sort=score:flip_flop&order=descending&reference=alibi), so a link shares
// them and a reload keeps them. Plain DOM, no library; the pages read without it (the
// overview, in mean-rank order, against the default reference).
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

  // The cue above a table that scrolls sideways names the side where more columns are.
  var CUE = '⇆ This table scrolls sideways: more columns ';
  function cueText(left, right) {
    return CUE + (left && right ? 'on both sides.' : left ? 'to the left.' : 'to the right.');
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
          frame.parentNode.insertBefore(cue, frame);
        }
        function update() {
          var more = wrap.scrollWidth - wrap.clientWidth;
          var left = wrap.scrollLeft > 1;
          var right = wrap.scrollLeft < more - 1;
          cue.hidden = more <= 1;
          cue.textContent = cueText(left, right);
          frame.toggleAttribute('data-more-right', right);
          frame.toggleAttribute('data-more-left', left);
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
    var viewPicker = document.getElementById('lb-view');
    var picker = document.getElementById('reference');
    var views = viewPicker ? slice.call(viewPicker.options).map(function (o) { return o.value; }) : [];
    var entries = picker ? slice.call(picker.options).map(function (o) { return o.value; }) : [];

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
      if (viewPicker) {
        viewPicker.value = view;
      }
      cues();
    }

    // A column's name in the address: its kind, and its task where it has one.
    function columnKey(th) {
      var task = th.getAttribute('data-task');
      return th.getAttribute('data-col') + (task ? ':' + task : '');
    }

    function key(row, index, type) {
      var value = row.cells[index].getAttribute('data-sort');
      if (type === 'text') {
        return value;
      }
      return value === '' || value === null ? null : parseFloat(value);
    }

    // Sorts by header `index`, in `ascending` order (undefined: its next press's order).
    function sortBy(index, ascending) {
      var th = headers[index];
      var type = th.getAttribute('data-type');
      if (ascending === undefined) {
        var current = th.getAttribute('aria-sort');
        ascending = current
          ? current !== 'ascending'
          : th.getAttribute('data-first') !== 'descending';
      }
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

    var verdicts = {};
    var data = document.getElementById('verdicts');
    if (data) {
      verdicts = JSON.parse(data.textContent);
    }
    // Best first (as posenc/benchmark/leaderboard/data.py's VERDICT_ORDER); a verdict not
    // named here sorts with 'not separated'.
    var order = {'reference': 0, 'better': 1, 'undecided': 2, 'not separated': 3, 'worse': 4};
    function setReference(reference) {
      if (picker) {
        picker.value = reference;
      }
      table.setAttribute('data-reference', reference);
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
    }

    // The state in the address: written after each change, read once on load.
    function remember() {
      var sorted = headers.filter(function (h) { return h.hasAttribute('aria-sort'); })[0];
      var state = new URLSearchParams();
      state.set('view', table.getAttribute('data-view'));
      if (sorted) {
        state.set('sort', columnKey(sorted));
        state.set('order', sorted.getAttribute('aria-sort'));
      }
      state.set('reference', table.getAttribute('data-reference'));
      try {
        history.replaceState(null, '', '#' + state.toString());
      } catch (e) {
        location.replace('#' + state.toString());
      }
    }

    // A fragment with no '=' is an anchor of the page (#downloads): left alone. Anything
    // else it does not understand is named in one line above the table and ignored.
    function restore() {
      var fragment = location.hash.replace(/^#/, '');
      if (fragment.indexOf('=') < 0) {
        return;
      }
      var problems = [];
      var state = new URLSearchParams(fragment);
      var known = {view: 1, sort: 1, order: 1, reference: 1};
      state.forEach(function (value, name) {
        if (!(name in known)) {
          problems.push('"' + name + '" (the address keeps view, sort, order and reference)');
        }
      });
      var reference = state.get('reference');
      if (reference !== null) {
        if (entries.indexOf(reference) >= 0) {
          setReference(reference);
        } else {
          problems.push('reference=' + reference + ' (the entries: ' + entries.join(', ') + ')');
        }
      }
      var view = state.get('view');
      if (view !== null) {
        if (views.indexOf(view) >= 0) {
          setView(view);
        } else {
          problems.push('view=' + view + ' (the views: ' + views.join(', ') + ')');
        }
      }
      var sort = state.get('sort');
      var direction = state.get('order');
      if (direction !== null && direction !== 'ascending' && direction !== 'descending') {
        problems.push('order=' + direction + ' (ascending or descending)');
        direction = null;
      }
      if (sort !== null) {
        var index = headers.map(columnKey).indexOf(sort);
        if (index >= 0) {
          sortBy(index, direction === null ? undefined : direction === 'ascending');
        } else {
          problems.push('sort=' + sort + ' (a column: ' + headers.map(columnKey).join(', ') + ')');
        }
      }
      var note = document.querySelector('.lb-fragment');
      if (note && problems.length) {
        note.textContent = 'Not understood in the address, and ignored: ' + problems.join('; ') + '.';
        note.hidden = false;
      }
    }

    headers.forEach(function (th, index) {
      var button = th.querySelector('button');
      if (button) {
        button.addEventListener('click', function () {
          sortBy(index);
          remember();
        });
      }
    });
    if (viewPicker) {
      viewPicker.addEventListener('change', function () {
        setView(viewPicker.value);
        remember();
      });
    }
    if (picker) {
      picker.addEventListener('change', function () {
        setReference(picker.value);
        remember();
      });
    }

    setView(viewPicker ? viewPicker.value : 'all');
    restore();
    // A link followed from another page's fragment, or the back button: read it again.
    window.addEventListener('hashchange', restore);
  }
}());
