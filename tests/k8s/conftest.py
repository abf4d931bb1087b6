"""Fixtures for the Kubernetes manifest tests: kubectl, every overlay rendered once per session, and
the Secrets cert-manager would write for the rendered Certificates.

The tests need ``kubectl`` (v1.32 with kustomize v5.5 here) for ``kubectl kustomize``, which runs
offline, and ``openssl`` to issue certificates as cert-manager would (``cert_manager.py``); without
them they skip with the reason. Nothing talks to a cluster.
"""

from __future__ import annotations

import pytest

from tests.k8s import cert_manager, manifests
from tests.k8s.manifests import Doc, SecretData


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


@pytest.fixture(scope="session")
def issued(
    rendered: dict[str, list[Doc]], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict[str, SecretData]]:
    """overlay name -> the Secrets its Certificates would get (secret name -> data)."""
    if (
        any(manifests.of_kind(docs, "Certificate") for docs in rendered.values())
        and not cert_manager.available()
    ):
        pytest.skip("needs openssl to issue the certificates cert-manager would")
    return {
        overlay: dict(cert_manager.issue(docs, tmp_path_factory.mktemp(f"cert-manager-{overlay}")))
        for overlay, docs in rendered.items()
    }
