"""Opt-in product images that an image sync must not simply copy: other hosts, redirects,
wrong content types, oversized and failing bodies, names that climb out of their folder.

``add_odd_images`` appends them to one product's record (nothing changes unless it is
called); the sandbox serves them under ``/media/odd/<kind>/<sku>/<name>``.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from ductwork.contract.encoding import quote_sku
from sandbox.asgi import Answer, Send, send_answer
from sandbox.media import image_png
from sandbox.state import SandboxState

ODD_MEDIA_PREFIX = "/media/odd/"
METADATA_URL = "http://169.254.169.254/latest/meta-data/iam/security-credentials/"
BIG_BYTES = 2 * 1024 * 1024
CHUNK = 64 * 1024


@dataclass(frozen=True)
class OddImages:
    """The product given odd images, and each odd image's URL by name."""

    sku: str
    urls: dict[str, str]


def add_odd_images(state: SandboxState, sku: str | None = None) -> OddImages:
    """Append the odd images to one indoor unit's record (the first, unless ``sku`` names
    one): each name in the answer is one way an image URL can be wrong or hostile."""
    with state.lock:
        records = state.units["indoor-units"]
        record = records[0] if sku is None else next(r for r in records if r["sku"] == sku)
        sku = record["sku"]
        base = state.public_url.rstrip("/")
        here = urlsplit(base)
        elsewhere = f"{here.scheme}://localhost:{here.port}"  # same server, another host name
        quoted = quote_sku(sku)

        def odd(kind: str, name: str = "0.png") -> str:
            return f"{base}{ODD_MEDIA_PREFIX}{kind}/{quoted}/{name}"

        urls = {
            "other_host": f"{elsewhere}/media/images/{quoted}/0.png",
            "metadata_address": METADATA_URL,
            "redirect_away": odd("redirect-away"),
            "redirect_home": odd("redirect-home"),
            "not_an_image": odd("html"),
            "svg": odd("svg", "0.svg"),
            "oversized": odd("big"),
            "oversized_unannounced": odd("big-streamed"),
            "failing": odd("broken"),
            "climbing_name": odd("image", "..%2F..%2Fmanuals%2Fx.png"),
            "same_file_name": odd("image", "0.png"),
        }
        record["images"] = [
            *record["images"],
            *({"url": url, "kind": "gallery", "width": 8, "height": 8} for url in urls.values()),
        ]
        state.rebuild_catalog()
    return OddImages(sku, urls)


async def serve_odd_media(state: SandboxState, path: str, send: Send) -> None:
    """Answer ``/media/odd/<kind>/<sku>/<name>`` as the kind says."""
    kind, _, rest = path[len(ODD_MEDIA_PREFIX) :].partition("/")
    sku, _, name = rest.partition("/")
    base = state.public_url.rstrip("/")
    if sku not in state.view().resolver:
        await send_answer(send, Answer(404, b'{"error":"no such image"}'))
    elif kind == "redirect-away":
        where = f"http://localhost:{urlsplit(base).port}/media/images/{quote_sku(sku)}/0.png"
        await send_answer(send, Answer(302, b"", "text/plain", {"Location": where}))
    elif kind == "redirect-home":
        where = f"/media/images/{quote_sku(sku)}/1.png"  # relative: the same host
        await send_answer(send, Answer(302, b"", "text/plain", {"Location": where}))
    elif kind == "html":
        await send_answer(send, Answer(200, b"<html><body>not an image</body></html>", "text/html"))
    elif kind == "svg":
        svg = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'
        await send_answer(send, Answer(200, svg, "image/svg+xml"))
    elif kind == "big":
        await send_answer(send, Answer(200, _big_png(), "image/png"))
    elif kind == "big-streamed":
        await _send_without_length(send, _big_png())
    elif kind == "broken":
        await send_answer(send, Answer(500, b'{"error":"image store unavailable"}'))
    elif kind == "image":
        await send_answer(send, Answer(200, image_png(f"odd:{sku}:{name}", 0), "image/png"))
    else:
        await send_answer(send, Answer(404, b'{"error":"no such image"}'))


def _big_png() -> bytes:
    """A PNG signature followed by more bytes than an image sync should accept."""
    return b"\x89PNG\r\n\x1a\n" + bytes(BIG_BYTES)


async def _send_without_length(send: Send, body: bytes) -> None:
    """A 200 image/png sent in chunks with no Content-Length: only counting notices the size."""
    headers = [(b"content-type", b"image/png")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    for start in range(0, len(body), CHUNK):
        chunk = body[start : start + CHUNK]
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b""})
