"""``ductwork demo``: the sandbox upstream, a full sync, the read API and the Dagster UI."""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

from ductwork.contract import paths
from ductwork.keys import KeyFile
from ductwork.settings import HomeSettings, load, upstream_environment
from pipelines.instance import prepare_dagster_home
from pipelines.processes import (
    WORKSPACE,
    ProcessGroup,
    installed_command,
    run_until_stopped,
    taken_port,
    wait_until_answering,
)

HOST = "127.0.0.1"
BUCKET = "ductwork-demo"


def _ductwork(*args: str) -> list[str]:
    return [sys.executable, "-m", "pipelines.cli", *args]


def run_demo(options: argparse.Namespace) -> int:
    """Run everything until SIGINT, SIGTERM or SIGHUP (or until the API answered, with
    --exit-after-sync); then stop every process it started. Returns 128 + the signal's number
    after a signal, 2 (having started nothing) when one of its ports is taken."""
    taken = taken_port(HOST, _ports(options))
    if taken is not None:
        print(f"ductwork: {taken}", file=sys.stderr)
        return 2
    if "DUCTWORK_HOME" not in os.environ:
        os.environ["DUCTWORK_HOME"] = str(Path(".ductwork/demo").resolve())
    home = load(HomeSettings)
    upstream_key = "sandbox-" + secrets.token_urlsafe(16)
    env = {
        **os.environ,
        **upstream_environment(_upstream_url(options), upstream_key, _s3_url(options), BUCKET),
        "AWS_ACCESS_KEY_ID": os.environ.get("AWS_ACCESS_KEY_ID", "demo"),
        "AWS_SECRET_ACCESS_KEY": os.environ.get("AWS_SECRET_ACCESS_KEY", "demo"),
        "DAGSTER_HOME": str(prepare_dagster_home(home.dagster_home)),
    }
    os.environ.update(env)
    demo = _Demo(options, home, env, upstream_key)
    return run_until_stopped("demo", demo.run)


@dataclass(frozen=True)
class _Demo:
    """What the demo starts, in the group ``run_until_stopped`` stops: the object store and
    the sandbox, a full sync, then the read API and the Dagster UI."""

    options: argparse.Namespace
    home: HomeSettings
    env: dict[str, str]
    upstream_key: str

    @property
    def s3_url(self) -> str:
        return _s3_url(self.options)

    @property
    def upstream_url(self) -> str:
        return _upstream_url(self.options)

    def run(self, group: ProcessGroup) -> int:
        """Start everything; 1 if the sync failed, 0 after the sync with --exit-after-sync,
        else wait for a stop signal."""
        self.start_upstreams(group)
        print(f"[demo] full sync into {self.home.warehouse_path} (runs recorded in the Dagster UI)")
        # A child of the group: a stop signal reaches it as SIGTERM, and it ends its run as
        # canceled within the group's grace period.
        if group.start(_ductwork("sync"), self.env).wait() != 0:
            print("[demo] the sync failed; see the run above", file=sys.stderr)
            return 1
        self.start_api_and_ui(group)
        if self.options.exit_after_sync:
            return 0
        print("Press Ctrl-C to stop everything.", flush=True)
        while True:
            signal.pause()

    def start_upstreams(self, group: ProcessGroup) -> None:
        """The object store (its bucket seeded) and the sandbox upstream, once they answer."""
        options, env = self.options, self.env
        # The emulator logs a line per request (one per manual put in the bucket below): to
        # a file, so that the demo's first screen is its own.
        moto_log = self.home.home / "demo-object-store.log"
        print(f"[demo] object store (moto S3 server) on {self.s3_url}, bucket {BUCKET}; "
              f"log {moto_log}")  # fmt: skip
        moto = group.start(
            [installed_command("moto_server"), "-H", HOST, "-p", str(options.s3_port)],
            env,
            output=moto_log,
        )
        wait_until_answering(self.s3_url, moto)
        _seed_bucket(self.s3_url, options.seed)
        print(f"[demo] sandbox upstream ({options.scale}, seed {options.seed}) on "
              f"{self.upstream_url}")  # fmt: skip
        sandbox = group.start(
            _ductwork(
                "sandbox", "--host", HOST, "--port", str(options.sandbox_port),
                "--seed", str(options.seed), "--scale", options.scale,
                "--api-key", self.upstream_key,
                "--s3-endpoint-url", self.s3_url, "--s3-bucket", BUCKET,
            ),
            env,
        )  # fmt: skip
        wait_until_answering(self.upstream_url + "/_sandbox/stats", sandbox, timeout_s=300)

    def start_api_and_ui(self, group: ProcessGroup) -> None:
        """A demo key, the read API once it answers, the Dagster UI; then the summary."""
        options = self.options
        api_url = f"http://{HOST}:{options.api_port}"
        key = KeyFile(self.home.keys_path).create("demo", ["all"])
        serving = _ductwork("serve", "--host", HOST, "--port", str(options.api_port))
        api = group.start(serving, self.env)
        wait_until_answering(api_url + paths.PRODUCTS_LIST, api)
        ui_url = None
        if not options.no_ui:
            ui_url = f"http://{HOST}:{options.ui_port}"
            dev = [installed_command("dg"), "dev", "-w", str(WORKSPACE), "-h", HOST]
            dev += ["-p", str(options.ui_port)]
            group.start(dev, self.env)
        _print_summary(api_url, key, ui_url, self.home)


def _s3_url(options: argparse.Namespace) -> str:
    """The object store's URL."""
    return f"http://{HOST}:{options.s3_port}"


def _upstream_url(options: argparse.Namespace) -> str:
    """The sandbox upstream's URL."""
    return f"http://{HOST}:{options.sandbox_port}"


def _ports(options: argparse.Namespace) -> list[tuple[str, int]]:
    """Every port the demo binds, with what binds it."""
    ports = [("read API", options.api_port)]
    if not options.no_ui:
        ports.append(("Dagster UI", options.ui_port))
    ports += [("sandbox upstream", options.sandbox_port), ("S3 server", options.s3_port)]
    return ports


def _seed_bucket(s3_url: str, seed: int) -> None:
    """Create the demo bucket and put in it what the upstream's store holds."""
    from assets.resources import ObjectStore
    from sandbox.server import seed_bucket

    client = ObjectStore(bucket=BUCKET, endpoint_url=s3_url).client()
    client.create_bucket(Bucket=BUCKET)
    seed_bucket(client, BUCKET, seed, 40)


def _installed_command() -> str:
    """The ``ductwork`` command of this environment, as a newcomer can paste it (relative to
    the current folder when inside it: ``.venv/bin/ductwork``)."""
    command = Path(sys.prefix) / "bin" / "ductwork"
    try:
        return str(command.relative_to(Path.cwd()))
    except ValueError:
        return str(command)


def _print_summary(api_url: str, key: str, ui_url: str | None, home: HomeSettings) -> None:
    print()
    print(f"  read API   {api_url}")
    print(f"  API key    {key}")
    if ui_url:
        print(f"  Dagster UI {ui_url}  (takes a few seconds to start)")
    print(f"  snapshots  {home.snapshots_dir}")
    command = _installed_command()
    print(f'  SQL        DUCTWORK_HOME={home.home} {command} sql "SELECT count(*) FROM units"')
    print()
    print(f'  curl -H "Authorization: Bearer {key}" "{api_url}/products/v2.0/indoor-units?count=2"')
    print()
