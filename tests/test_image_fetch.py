"""The image download guard against a real sandbox serving odd images: allowed hosts, the
address actually connected to, redirects, content types, the size cap, and object keys."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterator
from urllib.parse import quote

import pytest

from ductwork.settings import ImageSettings, SettingsError, load
from ductwork.upstream.image_fetch import Image, ImageFetcher, ImageFetchError
from ductwork.upstream.image_policy import ImagePolicy, ImageRefused, image_key, is_public_address
from sandbox.odd_media import BIG_BYTES, OddImages, add_odd_images
from sandbox.server import SandboxHandle, running_sandbox

MAX_BYTES = 1024 * 1024


@pytest.fixture(scope="module")
def odd_sandbox() -> Iterator[tuple[SandboxHandle, OddImages]]:
    """A tiny sandbox of its own whose first indoor unit carries the odd images."""
    with running_sandbox(seed=4411, scale="tiny") as handle:
        yield handle, add_odd_images(handle.state)


def listed(handle: SandboxHandle, max_bytes: int = MAX_BYTES) -> ImagePolicy:
    """The sandbox's own host:port explicitly listed, as the tests' settings do."""
    return ImagePolicy.for_upstream(handle.url, handle.url.removeprefix("http://"), max_bytes)


def fetch(policy: ImagePolicy, url: str) -> Image:
    async def run() -> Image:
        async with ImageFetcher(policy, concurrency=2, timeout_s=10, seed=1) as fetcher:
            return await fetcher.fetch(url)

    return asyncio.run(run())


def test_a_host_that_is_not_listed_is_refused_even_on_the_same_server(odd_sandbox) -> None:
    handle, odd = odd_sandbox
    with pytest.raises(ImageRefused, match="not an allowed image host"):
        fetch(listed(handle), odd.urls["other_host"])
    with pytest.raises(ImageRefused, match="not an allowed image host"):
        fetch(listed(handle), odd.urls["metadata_address"])
    # Listed by name, the same URL downloads: the list is what refused it.
    port = handle.url.rsplit(":", 1)[1]
    policy = ImagePolicy.for_upstream(handle.url, f"localhost:{port}", MAX_BYTES)
    assert fetch(policy, odd.urls["other_host"]).body.startswith(b"\x89PNG")


def test_by_default_only_the_upstreams_host_is_allowed_and_only_on_a_public_address(
    odd_sandbox,
) -> None:
    handle, odd = odd_sandbox
    plain = f"{handle.url}/media/images/{quote(odd.sku, safe='')}/0.png"
    default = ImagePolicy.for_upstream(handle.url, None, MAX_BYTES)
    with pytest.raises(ImageRefused, match=r"address 127\.0\.0\.1 is not public"):
        fetch(default, plain)
    assert fetch(listed(handle), plain).body.startswith(b"\x89PNG")


def test_a_name_resolving_to_loopback_is_refused_at_connection_unless_listed(odd_sandbox) -> None:
    handle, odd = odd_sandbox
    port = handle.url.rsplit(":", 1)[1]
    # The upstream named by a host name: allowed by default, but it resolves to loopback.
    by_name = ImagePolicy.for_upstream(f"http://localhost:{port}", None, MAX_BYTES)
    with pytest.raises(ImageRefused, match="resolves only to addresses that are not public"):
        fetch(by_name, odd.urls["other_host"])


def test_redirects_stay_on_the_same_host(odd_sandbox) -> None:
    handle, odd = odd_sandbox
    with pytest.raises(ImageRefused, match="redirect to another host"):
        fetch(listed(handle), odd.urls["redirect_away"])
    followed = fetch(listed(handle), odd.urls["redirect_home"])
    assert followed.body.startswith(b"\x89PNG") and followed.content_type == "image/png"


def test_only_image_content_types_are_accepted_and_never_svg(odd_sandbox) -> None:
    handle, odd = odd_sandbox
    with pytest.raises(ImageRefused, match="'text/html' is not an accepted image type"):
        fetch(listed(handle), odd.urls["not_an_image"])
    with pytest.raises(ImageRefused, match="'image/svg\\+xml' is not an accepted image type"):
        fetch(listed(handle), odd.urls["svg"])


def test_bodies_over_the_cap_are_refused_whether_announced_or_not(odd_sandbox) -> None:
    handle, odd = odd_sandbox
    with pytest.raises(ImageRefused, match="over the 1048576-byte cap"):
        fetch(listed(handle), odd.urls["oversized"])
    with pytest.raises(ImageRefused, match="body over the 1048576-byte cap"):
        fetch(listed(handle), odd.urls["oversized_unannounced"])
    roomy = listed(handle, max_bytes=BIG_BYTES + 8)
    assert len(fetch(roomy, odd.urls["oversized_unannounced"]).body) == BIG_BYTES + 8


def test_a_failing_image_host_is_retried_then_reported(odd_sandbox) -> None:
    handle, odd = odd_sandbox
    with pytest.raises(ImageFetchError, match="HTTP 500; gave up after 3 attempts"):
        fetch(listed(handle), odd.urls["failing"])


def test_object_keys_stay_in_the_skus_folder_and_never_collide() -> None:
    climbing = "https://cdn.example/media/x/..%2F..%2Fmanuals%2Fx.pdf"
    key = image_key("AB-1", climbing)
    assert key == f"images/AB-1/{hashlib.sha256(climbing.encode()).hexdigest()}.pdf"
    first, second = "https://a.example/1/front.png", "https://a.example/2/front.png"
    assert image_key("AB-1", first) != image_key("AB-1", second)
    assert image_key("A/B ..", first).startswith("images/A%2FB%20../")
    assert image_key("..", first).startswith("images/%2E%2E/")
    assert image_key("AB-1", "https://a.example/x/photo.PNG?v=2").endswith(".png")
    assert image_key("AB-1", "https://a.example/x/photo.p$g").rsplit("/", 1)[1].isalnum()


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("93.184.216.34", True),
        ("2606:2800:220:1:248:1893:25c8:1946", True),
        ("127.0.0.1", False),
        ("169.254.169.254", False),
        ("10.1.2.3", False),
        ("192.168.0.1", False),
        ("100.64.0.1", False),
        ("0.0.0.0", False),
        ("::1", False),
        ("fe80::1%eth0", False),
        ("fd00::1", False),
        ("::ffff:127.0.0.1", False),
        ("64:ff9b::a9fe:a9fe", False),
        ("224.0.0.1", False),
    ],
)
def test_which_addresses_count_as_public(address: str, public: bool) -> None:
    assert is_public_address(address) is public


def test_a_malformed_image_host_setting_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUCTWORK_IMAGE_HOSTS", "cdn.example, http://x.example/path")
    with pytest.raises(SettingsError, match=r"DUCTWORK_IMAGE_HOSTS .*http://x\.example/path"):
        load(ImageSettings)
