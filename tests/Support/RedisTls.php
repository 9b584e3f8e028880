<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Support;

/**
 * How a RedisServer of the tests serves TLS (TlsFiles::server()): on its port, and on no plain
 * one; and how redis-cli, the tests' own client, talks to it.
 */
final class RedisTls
{
    /**
     * @param bool $clientCertificates whether the server refuses clients without a certificate its CA signed
     * @param bool $verifiable false for a server certificate that is not to verify (expired): redis-cli
     *                         then skips verifying it, since it is the sidecar that is to refuse it
     */
    public function __construct(
        public readonly string $cert,
        public readonly string $key,
        public readonly string $ca,
        public readonly bool $clientCertificates,
        private readonly string $clientCert,
        private readonly string $clientKey,
        private readonly bool $verifiable,
    ) {
    }

    /** @return list<string> the arguments of redis-server serving TLS on $port only */
    public function serverArgs(int $port): array
    {
        return [
            '--port', '0', '--tls-port', (string) $port,
            '--tls-cert-file', $this->cert, '--tls-key-file', $this->key, '--tls-ca-cert-file', $this->ca,
            '--tls-auth-clients', $this->clientCertificates ? 'yes' : 'no',
        ];
    }

    /** @return list<string> the arguments of redis-cli talking to it, with the client certificate */
    public function cliArgs(): array
    {
        return ['--tls', '--cacert', $this->ca, '--cert', $this->clientCert, '--key', $this->clientKey, ...($this->verifiable ? [] : ['--insecure'])];
    }
}
