// The leaderboard's table: sort by a column (its header's button: a click, or Enter or
// Space from the keyboard), and pick the reference encoding the verdicts are against.
// Plain DOM, no library; the page reads the same without it, in mean-rank order.
(function () {
  'use strict';
  var table = document.querySelector('table.leaderboard');
  if (!table) {
    return;
  }
  var body = table.tBodies[0];
  var headers = Array.prototype.slice.call(table.tHead.rows[0].cells);

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
    var ascending = th.getAttribute('aria-sort') !== 'ascending';
    var rows = Array.prototype.slice.call(body.rows);
    rows = rows.map(function (row, position) {
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
  if (!picker || !data) {
    return;
  }
  var verdicts = JSON.parse(data.textContent);
  var order = {'reference': 0, 'better': 1, 'not separated': 2, 'worse': 3};

  picker.addEventListener('change', function () {
    var reference = picker.value;
    Array.prototype.forEach.call(body.rows, function (row) {
      var name = row.getAttribute('data-entry');
      row.querySelectorAll('td.verdict').forEach(function (cell) {
        var task = cell.getAttribute('data-task');
        var against = verdicts[reference] || {};
        var verdict = name === reference ? 'reference'
          : ((against[name] || {})[task] || '–');
        cell.textContent = verdict;
        cell.className = 'verdict ' + verdict.replace(/[^A-Za-z0-9_.-]+/g, '_');
        cell.setAttribute('data-sort', verdict in order ? order[verdict] : 9);
      });
    });
  });
}());
