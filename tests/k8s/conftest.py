"""Fixtures for the Kubernetes manifest tests: kubectl, and every overlay rendered once per session.

The tests need ``kubectl`` (v1.32 with kustomize v5.5 here) for ``kubectl kustomize``, which runs
offline; without it they skip with the reason. Nothing talks to a cluster.
"""

from __future__ import annotations

import pytest

from tests.k8s import manifests
from tests.k8s.manifests import Doc


@pytest.fixture(scope="session")
def kubectl_path() -> str:
    path = manifests.kubectl()
    if path is None:
        pytest.skip("needs kubectl for `kubectl kustomize` (offline rendering)")
    return path


@pytest.fixture(scope="session")
def rendered(kubectl_path: str) -> dict[str, list[Doc]]:
    """overlay name -> its rendered objects."""
    return {
        name: manifests.render(manifests.OVERLAYS_DIR / name, kubectl_path) for name in manifests.overlays()
    }
