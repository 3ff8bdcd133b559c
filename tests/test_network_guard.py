import socket

import pytest

from tests.conftest import NetworkBlocked


def test_connecting_outside_loopback_is_refused():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s, pytest.raises(NetworkBlocked):
        s.connect(("203.0.113.7", 443))


async def test_loopback_is_allowed(fake_anthropic):
    host, port = fake_anthropic.base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=2) as s:
        assert s.getpeername()[1] == int(port)
