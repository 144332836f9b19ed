"""Hostile URLs: by default a media URL reaches only public addresses, checked on every
redirect hop, and the connection goes to the address that was checked."""

from __future__ import annotations

import httpx
import pytest

from mmprep.media.network import is_public
from tests.support.chat import chat, post, video
from tests.support.servers import LiveServer

PART = "messages[0].content[0].video_url"


def ask(server, url: str) -> httpx.Response:
    return post(server, chat(video(url)), timeout=30)


@pytest.fixture(scope="module")
def locked_down():
    with LiveServer(allow_private_networks=False) as live:
        yield live


def media_port(media_server) -> int:
    return int(media_server.url.rsplit(":", 1)[1])


HOSTILE_HOSTS = [
    "127.0.0.1",
    "localhost",
    "127.1",
    "2130706433",
    "0177.0.0.1",
    "0x7f.0.0.1",
    "0x7f000001",
    "[::1]",
    "[::ffff:127.0.0.1]",
    "[::ffff:7f00:1]",
    "0.0.0.0",
    "[::]",
]


@pytest.mark.parametrize("host", HOSTILE_HOSTS)
def test_loopback_in_any_spelling_is_refused_before_connecting(locked_down, media_server, host):
    path = f"/224p_6_vp9.webm?{host}"
    response = ask(locked_down, f"http://{host}:{media_port(media_server)}{path}")
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == PART
    if error["code"] != "invalid_media_url":  # a spelling the URL parser itself rejects
        assert error["code"] == "media_forbidden"
        assert "--allow-private-networks" in error["message"]
    assert media_server.fetches[path] == 0  # refused before any connection


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",  # cloud metadata
        "http://[fd00:ec2::254]/latest/meta-data/",  # AWS metadata over IPv6
        "http://10.0.0.1/a.mp4",
        "http://172.16.5.4/a.mp4",
        "http://192.168.1.1/a.mp4",
        "http://100.64.0.1/a.mp4",  # carrier-grade NAT
        "http://224.0.0.1/a.mp4",  # multicast
        "http://240.0.0.1/a.mp4",  # reserved
        "http://[fe80::1]/a.mp4",
        "http://[fc00::1]/a.mp4",
        "http://[2002:7f00:1::]/a.mp4",  # 6to4 wrapping 127.0.0.1
        "http://[64:ff9b::a9fe:a9fe]/a.mp4",  # NAT64 wrapping 169.254.169.254
    ],
)
def test_private_and_special_addresses_are_refused(locked_down, url):
    response = ask(locked_down, url)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "media_forbidden"


def test_public_addresses_pass_the_check():
    import ipaddress

    for address in ("8.8.8.8", "2001:4860:4860::8888", "::ffff:8.8.8.8", "1.1.1.1"):
        assert is_public(ipaddress.ip_address(address)), address


def test_the_switch_lets_an_on_premise_media_server_through(media_server):
    with LiveServer(allow_private_networks=True) as live:
        assert ask(live, f"{media_server.url}/224p_6_vp9.webm").status_code == 200


def test_allowed_domains_refuse_other_hosts(media_server):
    with LiveServer(allow_private_networks=True, allowed_media_domains=["localhost"]) as live:
        port = media_port(media_server)
        assert ask(live, f"http://localhost:{port}/224p_6_vp9.webm").status_code == 200
        response = ask(live, f"http://127.0.0.1:{port}/224p_6_vp9.webm")
    assert response.json()["error"]["code"] == "media_forbidden"
    assert "localhost" in response.json()["error"]["message"]


def test_every_redirect_hop_is_checked_again(media_server):
    # localhost is allowed; the media server redirects to 127.0.0.1, which is not.
    port = media_port(media_server)
    with LiveServer(allow_private_networks=True, allowed_media_domains=["localhost"]) as live:
        url = f"http://localhost:{port}/redirect-to/http://127.0.0.1:{port}/224p_6_vp9.webm"
        response = ask(live, url)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "media_forbidden"


def test_the_connection_goes_to_the_vetted_address_with_the_original_host(media_server):
    port = media_port(media_server)
    with LiveServer(allow_private_networks=True) as live:
        assert ask(live, f"http://localhost:{port}/224p_6_vp9.webm?pinned").status_code == 200
    # The URL named "localhost"; the request arrived at 127.0.0.1 carrying Host: localhost.
    assert media_server.hosts["/224p_6_vp9.webm?pinned"] == f"localhost:{port}"


@pytest.mark.parametrize("url", ["ftp://example.com/a.mp4", "gopher://127.0.0.1/", "jar:http://x/!/"])
def test_only_http_https_data_and_file_schemes(locked_down, url):
    assert ask(locked_down, url).json()["error"]["code"] == "invalid_media_url"
