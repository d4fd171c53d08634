"""A group the tests can share the data folder with."""

from __future__ import annotations

import grp
import os


def a_group_to_share_with() -> grp.struct_group:
    """A group other than the user's own where the user may choose one (root may choose any)."""
    if os.geteuid() == 0:
        others = [g for g in grp.getgrall() if g.gr_gid != os.getgid()]
        return next((g for g in others if g.gr_name == "daemon"), others[0])
    extra = [gid for gid in os.getgroups() if gid != os.getgid()]
    return grp.getgrgid(extra[0] if extra else os.getgid())
