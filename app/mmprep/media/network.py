"""Which hosts a media URL may reach, and the one address it will reach.

By default a media URL may only reach public internet addresses: loopback, private,
link-local (cloud metadata at 169.254.169.254 among them), carrier-grade NAT, multicast,
unspecified and reserved addresses are refused, in IPv4 and IPv6, and IPv6 forms that
embed an IPv4 address (mapped, 6to4, NAT64) are judged by the address they embed.
Numeric tricks (http://2130706433/, http://0177.0.0.1/, http://0x7f.1/) resolve to the
address they mean and are judged by it.

The host is resolved once; every address it resolves to must pass; the connection goes
to the vetted address (the URL's host only travels as the Host header and TLS SNI), so
a DNS answer that changes between check and connect (rebinding) changes nothing.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass

import httpx

from .errors import InvalidMediaURLError, MediaFetchError, MediaForbiddenError

NAT64 = ipaddress.ip_network("64:ff9b::/96")


@dataclass(frozen=True)
class PinnedURL:
    """Where to connect (an IP literal in the URL) and who the server must think we asked for."""

    url: httpx.URL
    host_header: str
    sni_hostname: str | None  # for https: the certificate must match the original host


@dataclass(frozen=True)
class NetworkPolicy:
    allow_private_networks: bool = False
    allowed_domains: tuple[str, ...] = ()

    async def pin(self, url: str) -> PinnedURL:
        """Check `url`'s host and resolve it to one vetted address. Raises MediaError."""
        try:
            parsed = httpx.URL(url)
        except (httpx.InvalidURL, ValueError) as error:
            raise InvalidMediaURLError(f"malformed URL: {error}") from error
        host = parsed.raw_host.decode("ascii").strip("[]").lower()
        if not host:
            raise InvalidMediaURLError("the URL names no host")
        self._check_domain(host)
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        address = await self._resolve(host, port)
        host_header = host if parsed.port is None else f"{host}:{parsed.port}"
        return PinnedURL(
            url=parsed.copy_with(host=str(address)),
            host_header=host_header,
            sni_hostname=host if parsed.scheme == "https" else None,
        )

    def _check_domain(self, host: str) -> None:
        if self.allowed_domains and not any(
            host == domain or host.endswith("." + domain) for domain in self.allowed_domains
        ):
            raise MediaForbiddenError(
                f"media URLs may only name {', '.join(self.allowed_domains)} on this server, not {host!r}"
            )

    async def _resolve(self, host: str, port: int) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as error:
            raise MediaFetchError(f"cannot resolve the host {host!r}: {error}") from error
        # Each an IPv4 or IPv6 address (the families asked for), whose host is a str: an
        # IPv6 one may carry a "%zone".
        hosts = [info[4][0] for info in infos if isinstance(info[4][0], str)]
        addresses = list(dict.fromkeys(ipaddress.ip_address(host.split("%")[0]) for host in hosts))
        if not addresses:
            raise MediaFetchError(f"the host {host!r} resolves to no address")
        if not self.allow_private_networks:
            for address in addresses:
                if not is_public(address):
                    raise MediaForbiddenError(
                        f"the media URL's host {host!r} is the non-public address {address}; "
                        "this server fetches only from public addresses (see --allow-private-networks)"
                    )
        return addresses[0]


def is_public(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """True only for a globally routable unicast address."""
    if address.version == 6:
        embedded = address.ipv4_mapped or address.sixtofour
        if embedded is None and address in NAT64:
            embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if embedded is not None:
            return is_public(embedded)
    return address.is_global and not address.is_multicast
