"""Sphinx configuration of posenc's documentation site.

  pip install -e '.[docs]' && python -m sphinx -W docs docs/_build

The pages are the markdown of docs/ (MyST), the README as the home page, the API reference
from the docstrings (autodoc, Google style through napoleon), the launchers' flags and the
cpu-v2 leaderboard, both generated at build time (docs/_ext/posenc_site.py). Everything the
pages load is bundled beside them: they open from the disk and from any static host, search
with its snippets included.
"""

import os
import sys

DOCS = os.path.dirname(os.path.abspath(__file__))
# The checkout the docs describe, and the site's own extension.
sys.path[:0] = [os.path.dirname(DOCS), os.path.join(DOCS, '_ext')]

project = 'posenc'
author = 'posenc authors'
copyright = 'posenc authors'
extensions = [
  'myst_parser',
  'sphinx.ext.autodoc',
  'sphinx.ext.autosummary',
  'sphinx.ext.napoleon',
  'sphinx_copybutton',
  'posenc_site',
]
source_suffix = {'.md': 'markdown'}
exclude_patterns = ['_build', '_ext', '_static']
# '#intervals-and-verdicts' in a page's links: anchors for headings down to level 4.
myst_heading_anchors = 4
myst_enable_extensions = ['colon_fence']
autodoc_member_order = 'bysource'
# The summary tables link to the entries on the page; no page per object.
autosummary_generate = False
# `name` in a docstring is code, as it reads in plain text; a literal block is plain text
# unless it names its language.
default_role = 'code'
highlight_language = 'text'
autodoc_typehints = 'description'
napoleon_google_docstring = True
napoleon_numpy_docstring = False

# A code block's copy button leaves out the prompts of a doctest (`>>> `, `... `) or a shell
# session (`$ `, at the start of a line) and the output after them; a block without prompts
# is copied whole. A command continued with a backslash is copied with its next lines.
copybutton_prompt_text = r'>>> |\.\.\. |\$ '
copybutton_prompt_is_regexp = True
copybutton_only_copy_prompt_lines = True
copybutton_line_continuation_character = '\\'

html_theme = 'sphinx_book_theme'
html_title = 'posenc'
html_theme_options = {
  'show_toc_level': 2,
  'use_download_button': False,
  'use_fullscreen_button': False,
  # The search field is the sidebar's; pydata-sphinx-theme 0.20 would add a second one in a
  # header bar above the page.
  'navbar_persistent': [],
  # The leaderboard's table takes the width the page's contents column would: at 1366 px
  # its overview fits whole.
  'secondary_sidebar_items': {'**': ['page-toc.html'], 'leaderboard': []},
}
# The theme's colour mode; without one its script logs an error in the console.
html_context = {'default_mode': 'light'}
html_static_path = ['_static']
html_css_files = ['posenc.css']
# Wide tables say that they scroll (posenc.js); the leaderboard's page and the search page
# get their own scripts from posenc_site.
html_js_files = ['posenc.js']
html_show_sourcelink = False
html_copy_source = False
