"""Which containers of one pod may hold the same exclusive CPU or device, as the kubelet hands
them on: a regular init container's CPUs (``cpusToReuse``) and devices (``devicesToReuse``)
are taken first by the pod's next containers; an app or sidecar container that takes them
removes them from the reusable set, so no second one gets them. So: any number of regular init
containers, then at most one other container."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from numalign.errors import StateError
from numalign.pods import ContainerKind

INIT = ContainerKind.INIT.value


def check_sharing(what: str, uid: str, holders: Iterable[str],
                  kinds: Mapping[str, str] | None) -> None:
    """Raise :class:`StateError` if ``holders`` (container names of pod ``uid`` holding
    ``what``) include two containers that are not regular init containers. ``kinds``:
    container -> ``init``/``sidecar``/``app`` where known (a holder of unknown kind, from a
    state written before kinds were kept, is not judged)."""
    known = kinds or {}
    keeping = [n for n in holders if known.get(n, INIT) != INIT]
    if len(keeping) > 1:
        raise StateError(
            f"{what} is held by containers {keeping[0]} and {keeping[1]} of pod {uid} "
            f"(only an init container's go on to another container)")


__all__ = ["check_sharing"]
