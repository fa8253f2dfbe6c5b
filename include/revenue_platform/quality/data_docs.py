"""Make GX Data Docs self-contained: every script, stylesheet, font and image from the site itself.

Great Expectations 1.x writes Data Docs pages that load jQuery, Bootstrap, bootstrap-table, Font
Awesome and the GX logo from public CDNs. The platform runs where there is no internet, and there
those pages render unstyled with an empty validation list (the list is drawn by bootstrap-table's
JavaScript). `localize_data_docs(site)` fixes a built site in place:

* copies the vendored files (`data_docs_assets/`, exact versions and licenses in its README) to
  `<site>/static/vendor/`;
* rewrites each CDN reference in every page (and GX's stylesheet) to the relative path of its
  vendored copy, dropping `integrity`/`crossorigin` (a page opened from file:// has no CORS origin);
* points the GX logo at the copy GX itself puts in `<site>/static/images/`, and the favicon link
  of validation pages at the right folder (GX's is one level short);
* removes the Vega script tags: only GX's chart renderers use Vega, and the platform's suites
  render no chart (`external_references` reports any page that would need it).

Idempotent: a page already rewritten is left as is, so it runs after every checkpoint.
Until the first quality run has built a site, `NO_QUALITY_RUN_YET_PAGE` stands in for its index page.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from pathlib import Path
from typing import Final

log = logging.getLogger(__name__)

ASSETS_DIR: Final = Path(__file__).parent / "data_docs_assets"
VENDOR_DIR: Final = Path("static") / "vendor"

# CDN URL in GX 1.24's templates -> file under data_docs_assets/ (same version, same bytes where
# GX pins an integrity hash).
CDN_FILES: Final = {
    "https://code.jquery.com/jquery-3.7.1.min.js": "jquery/jquery.min.js",
    "https://cdnjs.cloudflare.com/ajax/libs/popper.js/1.12.9/umd/popper.min.js": "popper/popper.min.js",
    "https://stackpath.bootstrapcdn.com/bootstrap/4.3.1/js/bootstrap.min.js": "bootstrap/bootstrap.min.js",
    "https://maxcdn.bootstrapcdn.com/bootstrap/4.3.1/css/bootstrap.min.css": "bootstrap/bootstrap.min.css",
    "https://unpkg.com/bootstrap-table@1.19.1/dist/bootstrap-table.min.js": (
        "bootstrap-table/bootstrap-table.min.js"
    ),
    "https://unpkg.com/bootstrap-table@1.19.1/dist/bootstrap-table.min.css": (
        "bootstrap-table/bootstrap-table.min.css"
    ),
    "https://unpkg.com/bootstrap-table@1.19.1/dist/extensions/filter-control/"
    "bootstrap-table-filter-control.min.js": "bootstrap-table/bootstrap-table-filter-control.min.js",
    # GX references 1.19.0's stylesheet (two spellings) next to 1.19.1's script; 1.19.1's is used.
    "https://unpkg.com/bootstrap-table@1.19.0/dist/extensions/filter-control/"
    "bootstrap-table-filter-control.min.css": "bootstrap-table/bootstrap-table-filter-control.min.css",
    "https://unpkg.com/bootstrap-table@1.19.0/dist/extensions/filter-control/"
    "bootstrap-table-filter-control.css": "bootstrap-table/bootstrap-table-filter-control.min.css",
    "https://cdnjs.cloudflare.com/ajax/libs/bootstrap-datepicker/1.9.0/js/bootstrap-datepicker.min.js": (
        "bootstrap-datepicker/bootstrap-datepicker.min.js"
    ),
    "https://cdnjs.cloudflare.com/ajax/libs/bootstrap-datepicker/1.9.0/css/bootstrap-datepicker.min.css": (
        "bootstrap-datepicker/bootstrap-datepicker.min.css"
    ),
    "https://cdnjs.cloudflare.com/ajax/libs/font-awesome/6.6.0/css/all.min.css": (
        "fontawesome/css/all.min.css"
    ),
    "https://cdn.jsdelivr.net/npm/@forevolve/bootstrap-dark@1.1.0/dist/css/bootstrap-prefers-dark.css": (
        "bootstrap-dark/bootstrap-prefers-dark.min.css"
    ),
}
_GX_IMAGES_HOST: Final = "https://great-expectations-web-assets.s3.us-east-2.amazonaws.com/"
# The dark-mode logo is not shipped with GX; the light one (which GX copies into the site) stands in.
_GX_IMAGES: Final = {"logo-long.png": "logo-long.png", "full_logo_dark.png": "logo-long.png"}
_VEGA_TAG: Final = re.compile(r'<script src="https://cdn\.jsdelivr\.net/npm/vega[a-z-]*@\d+"></script>\s*')
_TAG_WITH_URL: Final = re.compile(r"<(?:script|link)\b[^>]*>")
_CORS_ATTRIBUTES: Final = re.compile(r'\s+(?:integrity|crossorigin)="[^"]*"')
# What a browser fetches by itself: script/link/img sources and CSS url(); never plain <a> links.
_FETCHED: Final = re.compile(
    r"""<(?:script|img|iframe)\b[^>]*\bsrc\s*=\s*["']((?:https?:)?//[^"']+)"""
    r"""|<link\b[^>]*\bhref\s*=\s*["']((?:https?:)?//[^"']+)"""
    r"""|url\(\s*["']?((?:https?:)?//[^"')]+)"""
)


# Served at the site's index while no quality run has built one (right after `make demo`): a page that
# says why there is nothing yet and how to get it, instead of a 404.
NO_QUALITY_RUN_YET_PAGE: Final = """<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Data Docs: no quality run yet</title>
<style>body { font-family: system-ui, sans-serif; max-width: 46rem; margin: 3rem auto; line-height: 1.5 }
code { background: #f3f3f3; padding: 0 .25rem }</style></head>
<body>
<h1>No quality run yet</h1>
<p>The Great Expectations Data Docs are built by every run of the <code>revenue_quality_checks</code> DAG
(hourly, on the live deployment) and by the quality gate of a blue-green replay. None has run on
this lake yet, so there is no validation result to show.</p>
<p>To build them now, trigger <code>revenue_quality_checks</code>: in the Airflow UI (Dags &rarr;
revenue_quality_checks &rarr; Trigger; the form's defaults check the live deployment's last hour), or
from the repository with <code>make airflow CMD="dags trigger revenue_quality_checks"</code>. Then reload
this page.</p>
</body>
</html>
"""


def _copy_assets(site: Path) -> None:
    shutil.copytree(ASSETS_DIR, site / VENDOR_DIR, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.md"))


def localize_text(text: str, site_prefix: str) -> str:
    """`text` (a page or stylesheet) with CDN references replaced; `site_prefix` leads to the site root."""
    vendor = f"{site_prefix}{VENDOR_DIR.as_posix()}/"

    def local_tag(match: re.Match[str]) -> str:
        tag = match.group(0)
        for url, local in CDN_FILES.items():
            if f'"{url}"' in tag:
                return _CORS_ATTRIBUTES.sub("", tag.replace(f'"{url}"', f'"{vendor}{local}"'))
        return tag

    text = _VEGA_TAG.sub("", text)
    text = _TAG_WITH_URL.sub(local_tag, text)
    for image, local in _GX_IMAGES.items():
        # The logo URL carries a cache-busting query (?d=<timestamp>); the local copy needs none.
        text = re.sub(
            re.escape(_GX_IMAGES_HOST + image) + r"(\?[^\"')]*)?",
            f"{site_prefix}static/images/{local}",
            text,
        )
    # GX 1.24 climbs one folder too few to the favicon on validation pages (a 404); use the site root.
    return re.sub(r'href="(?:\.\./)*static/images/', f'href="{site_prefix}static/images/', text)


def external_references(text: str) -> list[str]:
    """URLs on another host that a browser would fetch on its own when showing `text`."""
    return [next(group for group in match.groups() if group) for match in _FETCHED.finditer(text)]


def localize_data_docs(site: Path) -> list[Path]:
    """Rewrite every page (and stylesheet) of the Data Docs site under `site`; return the changed files."""
    if not site.is_dir():
        return []
    _copy_assets(site)
    changed: list[Path] = []
    for path in sorted([*site.rglob("*.html"), *(site / "static" / "styles").glob("*.css")]):
        prefix = os.path.relpath(site, path.parent).replace(os.sep, "/") + "/"
        prefix = "" if prefix == "./" else prefix
        original = path.read_text(encoding="utf-8")
        localized = localize_text(original, prefix)
        if localized != original:
            path.write_text(localized, encoding="utf-8")
            changed.append(path)
        left = external_references(localized)
        if left:
            log.warning("Data Docs page %s still loads from another host (offline it breaks): %s", path, left)
    return changed
