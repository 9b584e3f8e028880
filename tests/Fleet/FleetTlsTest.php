<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Fleet;

use Zeusi\GaneshaShmAdapter\Tests\Support\RedisServer;
use Zeusi\GaneshaShmAdapter\Tests\Support\RedisTls;
use Zeusi\GaneshaShmAdapter\Tests\Support\TlsFiles;

/**
 * Fleet mode over TLS (rediss://), as the managed Redis services serve it: Debian's redis-server
 * on a TLS port and no plain one, with a CA and certificates the test makes with openssl
 * (TlsFiles). A certificate that does not verify is refused, in one line saying so, and never
 * makes the sidecar fall back to plain TCP: the hosts decide alone.
 */
final class FleetTlsTest extends FleetTestCase
{
    private TlsFiles $tls;

    protected function setUp(): void
    {
        parent::setUp();
        if (TlsFiles::openssl() === null) {
            self::markTestSkipped('openssl is not installed (apt-get install openssl)');
        }
        $this->tls = TlsFiles::make($this->dir);
    }

    public function testFailuresSpreadOverTheFleetOpenEveryHostOverTls(): void
    {
        $this->redis = RedisServer::start($this->dir, tls: $this->tls->server());
        self::assertStringStartsWith('rediss://', $this->redis->url());
        $hosts = $this->startHosts(3, self::GANESHA, $this->redis->url(), ['--tls-ca-file', $this->tls->ca]);

        $after = $this->assertFailuresSpreadOverTheFleetOpenEveryHost($hosts, self::service('tls'));
        self::assertNotSame([], $this->keys("*{{$this->fleet}*"), 'the fleet wrote its counts, over TLS');
        self::report("TLS: every host open {$after} ms after the last failure (interval " . self::INTERVAL_MS . ' ms)');
    }

    /** With --cluster, every node over TLS, and each sidecar connected to each. */
    public function testFailuresSpreadOverTheFleetOpenEveryHostOnATlsCluster(): void
    {
        $urls = $this->startCluster($this->tls->server());
        self::assertSame(3, \substr_count($urls, 'rediss://'));
        $hosts = $this->startHosts(3, self::GANESHA, $urls, ['--cluster', '--tls-ca-file', $this->tls->ca]);

        $after = $this->assertFailuresSpreadOverTheFleetOpenEveryHost($hosts, self::service('tlscluster'));
        foreach ($this->nodes as $node) {
            self::assertGreaterThanOrEqual(3, \count(self::clients($node)), "node {$node->port}: a TLS connection of each sidecar");
        }
        self::report("TLS cluster: every host open {$after} ms after the last failure");
    }

    /** A server whose certificate another CA signed: refused, never trusted for lack of a better one. */
    public function testAServerCertificateOfAnotherCaIsRefusedAndTheHostsDecideAlone(): void
    {
        $this->assertTlsRefused(
            $this->tls->server(),
            ['--tls-ca-file', $this->tls->otherCa],
            "TLS: the server's certificate does not verify: it is not signed by a CA this host trusts",
            'UnknownIssuer',
            'TLS, another CA'
        );
    }

    public function testAnExpiredServerCertificateIsRefusedAndTheHostsDecideAlone(): void
    {
        $this->assertTlsRefused(
            $this->tls->server(expired: true),
            ['--tls-ca-file', $this->tls->ca],
            "TLS: the server's certificate does not verify: it has expired (",
            'certificate expired',
            'TLS, expired'
        );
    }

    /** A server that requires client certificates (mutual TLS) refuses a sidecar without one. */
    public function testAServerRequiringClientCertificatesRefusesASidecarWithoutOne(): void
    {
        $this->assertTlsRefused(
            $this->tls->server(clientCertificates: true),
            ['--tls-ca-file', $this->tls->ca],
            'TLS: the server requires a client certificate (--tls-cert-file, --tls-key-file)',
            // The server's TLS 1.3 alert, certificate_required, as rustls names it.
            'received fatal alert: CertificateRequired',
            'mutual TLS, no client certificate'
        );
    }

    public function testFailuresSpreadOverTheFleetOpenEveryHostOverMutualTls(): void
    {
        $this->redis = RedisServer::start($this->dir, tls: $this->tls->server(clientCertificates: true));
        $flags = ['--tls-ca-file', $this->tls->ca, '--tls-cert-file', $this->tls->clientCert, '--tls-key-file', $this->tls->clientKey];
        $hosts = $this->startHosts(3, self::GANESHA, $this->redis->url(), $flags);

        $after = $this->assertFailuresSpreadOverTheFleetOpenEveryHost($hosts, self::service('mtls'));
        self::report("mutual TLS: every host open {$after} ms after the last failure");
    }

    /** What a sidecar's line says after the URL, for the report. */
    private static function reason(string $line): string
    {
        return \substr($line, (int) \strpos($line, 'cannot connect to'));
    }

    /**
     * Sidecars given $flags against a server serving $server refuse it: each host's one line says
     * so in $words, with rustls's $reason, the hosts decide alone, and nothing reaches the server.
     *
     * @param list<string> $flags
     */
    private function assertTlsRefused(RedisTls $server, array $flags, string $words, string $reason, string $label): void
    {
        $this->redis = RedisServer::start($this->dir, tls: $server);
        $lines = $this->assertRefusedHostsDecideAlone($this->redis->url(), $flags);
        foreach ($lines as $name => $line) {
            self::assertStringContainsString("cannot connect to {$this->redis->url()}: {$words}", $line, $name);
            self::assertStringContainsString($reason, $line, "{$name}: rustls's reason");
        }
        self::assertSame([], $this->keys(), 'nothing reached the server');
        self::report("{$label}: " . self::reason($lines['h1']));
    }
}
