"""Which paths the emulator serves: both APIs, every version, prefixes, doubled slashes."""

import pytest

from faultlab.protocols.gemini import dialect_of

DEV = "/ws/google.ai.generativelanguage.{v}.GenerativeService.BidiGenerateContent"
VERTEX = "/ws/google.cloud.aiplatform.{v}.LlmBidiService/BidiGenerateContent"


@pytest.mark.parametrize("version", ["v1", "v1beta", "v1alpha"])
def test_developer_paths(version: str) -> None:
    """Every Developer API version, with a prefix, a doubled slash, a query or the
    ephemeral-token method."""
    path = DEV.format(v=version)
    assert dialect_of(path) == "developer"
    assert dialect_of("/prefix" + path + "?key=abc") == "developer"
    assert dialect_of("/" + path) == "developer"
    assert dialect_of(path + "Constrained") == "developer"


@pytest.mark.parametrize("version", ["v1", "v1beta1"])
def test_vertex_paths(version: str) -> None:
    """Both Vertex versions, also under a prefix."""
    assert dialect_of(VERTEX.format(v=version)) == "vertex"
    assert dialect_of("/p//" + VERTEX.format(v=version)) == "vertex"


@pytest.mark.parametrize("path", ["/", "/ws/other", DEV.format(v="v2"), DEV.format(v="v1") + "/x"])
def test_other_paths_are_not_served(path: str) -> None:
    """Anything else gets a 404 at the handshake."""
    assert dialect_of(path) is None
