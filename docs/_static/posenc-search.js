// Sphinx's search page fetches each result's page to show a snippet of it, and a browser
// refuses such a fetch for pages opened from the disk (file://). The build wrote every
// page's main text into posenc-search-pages.js (window.POSENC_SEARCH_PAGES, by address);
// this answers the search's fetches of those pages from it, from the disk and from a
// server alike, and leaves every other fetch alone.
(function () {
  'use strict';
  var pages = window.POSENC_SEARCH_PAGES;
  if (!pages || !window.fetch) {
    return;
  }
  var byAddress = {};
  Object.keys(pages).forEach(function (address) {
    byAddress[new URL(address, document.baseURI).href] = pages[address];
  });
  var fetch = window.fetch;
  window.fetch = function (resource) {
    var url = typeof resource === 'string' ? resource : resource && resource.url;
    var address = url && new URL(url, document.baseURI).href.split('#')[0].split('?')[0];
    if (address && Object.prototype.hasOwnProperty.call(byAddress, address)) {
      return Promise.resolve(new Response(byAddress[address], {
        headers: {'Content-Type': 'text/html; charset=utf-8'}
      }));
    }
    return fetch.apply(this, arguments);
  };
}());
