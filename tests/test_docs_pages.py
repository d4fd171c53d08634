"""The API's document pages (/docs, /redoc): their scripts and styles come from the installed
package, never a CDN, and Chromium renders both on this machine, which reaches no CDN."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ductwork.settings import HomeSettings, ServeSettings
from sandbox.local_server import serving
from serve.app import create_app
from tests.conftest import home_with_published_snapshot
from tests.helpers.browser import rendered_dom

PAGES = ("/docs", "/redoc")
# Every URL a page names itself (scripts, styles, icons, the document).
_REFERENCES = re.compile(r"""(?:src|href|spec-url|url:)\s*=?\s*["']([^"']+)["']""")


@pytest.fixture(scope="module")
def public_docs(synced_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The read API with its documents open to anyone, as a browser needs them."""
    home = tmp_path_factory.mktemp("docs")
    home_with_published_snapshot(synced_home, home)
    app = create_app(HomeSettings(home=home), ServeSettings(serve_public_docs=True))
    with serving(app) as url:
        yield url


@pytest.mark.parametrize("page", PAGES)
def test_a_docs_page_names_only_its_own_origins_files_and_each_is_served(
    public_docs: str, page: str
) -> None:
    answer = httpx.get(public_docs + page)
    assert answer.status_code == 200
    policy = answer.headers["content-security-policy"]
    assert "default-src 'self'" in policy and "script-src 'self' 'unsafe-inline'" in policy
    assert "persistAuthorization" not in answer.text
    references = _REFERENCES.findall(answer.text)
    assert references, answer.text[:500]
    for reference in references:
        assert reference.startswith("/") and not reference.startswith("//"), reference
        fetched = httpx.get(public_docs + reference)
        assert fetched.status_code == 200, reference
        assert len(fetched.content) > 0, reference
        assert fetched.headers["x-content-type-options"] == "nosniff", reference
    scripts = [r for r in references if r.endswith(".js")]
    assert scripts
    for script in scripts:
        assert httpx.get(public_docs + script).headers["content-type"].startswith("text/javascript")


def test_an_unknown_asset_is_a_404_problem(public_docs: str) -> None:
    answer = httpx.get(public_docs + "/docs/assets/..%2F..%2Fpyproject.toml")
    assert answer.status_code == 404
    assert answer.json()["type"] == "/problems/not-found"
    assert httpx.get(public_docs + "/docs/assets/index.html").status_code == 404


def test_the_assets_answer_only_an_ops_key_unless_the_documents_are_public(
    read_api_home: Path,
) -> None:
    app = create_app(HomeSettings(home=read_api_home), ServeSettings())
    with serving(app) as url:
        assert httpx.get(url + "/docs/assets/redoc.standalone.js").status_code == 401


@pytest.fixture(scope="module")
def read_api_home(synced_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("guarded-docs")
    home_with_published_snapshot(synced_home, home)
    return home


def test_chromium_renders_swagger_ui_with_every_family_offline(public_docs: str) -> None:
    dom = rendered_dom(public_docs + "/docs")
    assert "swagger-ui" in dom and "opblock" in dom, dom[:2000]
    for path in ("/products/v2.0/products", "/warehouse/v1.0/digital-assets", "/crm/v1.1/leads"):
        assert path in dom, path


def test_chromium_renders_redoc_with_its_operations_offline(public_docs: str) -> None:
    dom = rendered_dom(public_docs + "/redoc")
    assert "ductwork read API" in dom, dom[:2000]
    assert "All products (SKU, SRN, type, link), by SKU" in dom
    assert "Leads by (CreatedDate, Id), cursor-paged" in dom
