<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Support;

/**
 * The certificates of the TLS tests, made with the openssl command in a directory of the test:
 * a CA; a server certificate it signs for 127.0.0.1 (subjectAltName IP:127.0.0.1 and
 * DNS:localhost; for clients too, since a node of a TLS cluster presents it to the others on
 * the cluster bus, which requires one), and the same expired since 2020; a client certificate
 * it signs; and a second CA that signed none of them. EC keys (P-256), quick to make.
 *
 * Every certificate is signed with `openssl ca`, whose -startdate and -enddate set any validity,
 * a past one included, on every OpenSSL (`x509 -not_before` is 3.4's; Debian 12 has 3.0), from a
 * configuration of its own, so that no system openssl.cnf adds or changes an extension.
 */
final class TlsFiles
{
    private const CONFIG = <<<'CNF'
        [req]
        distinguished_name = subject
        [subject]
        [ca]
        default_ca = signer
        [signer]
        database = DIR/index.txt
        new_certs_dir = DIR
        serial = DIR/serial
        default_md = sha256
        policy = anything
        unique_subject = no
        [anything]
        commonName = supplied
        [ca_cert]
        basicConstraints = critical, CA:true
        keyUsage = critical, keyCertSign, cRLSign
        subjectKeyIdentifier = hash
        [server_cert]
        basicConstraints = CA:false
        keyUsage = critical, digitalSignature, keyEncipherment
        extendedKeyUsage = serverAuth, clientAuth
        subjectAltName = IP:127.0.0.1, DNS:localhost
        authorityKeyIdentifier = keyid
        [client_cert]
        basicConstraints = CA:false
        keyUsage = critical, digitalSignature
        extendedKeyUsage = clientAuth
        authorityKeyIdentifier = keyid
        CNF;

    public readonly string $ca;

    public readonly string $otherCa;

    public readonly string $serverCert;

    public readonly string $serverKey;

    /** The server's key, certified from 2020-01-01 to 2020-01-02. */
    public readonly string $expiredServerCert;

    public readonly string $clientCert;

    public readonly string $clientKey;

    private function __construct(private readonly string $dir)
    {
        $this->ca = "{$dir}/ca.crt";
        $this->otherCa = "{$dir}/other-ca.crt";
        $this->serverCert = "{$dir}/server.crt";
        $this->serverKey = "{$dir}/server.key";
        $this->expiredServerCert = "{$dir}/expired-server.crt";
        $this->clientCert = "{$dir}/client.crt";
        $this->clientKey = "{$dir}/client.key";
    }

    /** Null when openssl is not installed. */
    public static function openssl(): ?string
    {
        return Command::which('openssl');
    }

    /** Makes them all in $dir/tls. */
    public static function make(string $dir): self
    {
        $tls = new self("{$dir}/tls");
        if (!\mkdir($tls->dir, 0700)) {
            throw new \RuntimeException("Could not create {$tls->dir}");
        }
        \file_put_contents("{$tls->dir}/openssl.cnf", \str_replace('DIR', $tls->dir, self::CONFIG));
        \file_put_contents("{$tls->dir}/index.txt", '');
        \file_put_contents("{$tls->dir}/serial", "01\n");

        $tls->selfSigned('ca', 'ganesha-shm test CA');
        $tls->selfSigned('other-ca', 'ganesha-shm other CA');
        $tomorrow = \gmdate('YmdHis\Z', \time() + 86_400);
        $anHourAgo = \gmdate('YmdHis\Z', \time() - 3_600);
        $tls->signed('server', '127.0.0.1', 'server_cert', $anHourAgo, $tomorrow);
        $tls->sign('server', 'expired-server', 'server_cert', '20200101000000Z', '20200102000000Z');
        $tls->signed('client', 'ganesha-shm-fleet', 'client_cert', $anHourAgo, $tomorrow);

        return $tls;
    }

    /**
     * What a redis-server serves with: the server certificate (the expired one with $expired),
     * the CA it checks clients' certificates against, required with $clientCertificates.
     */
    public function server(bool $expired = false, bool $clientCertificates = false): RedisTls
    {
        return new RedisTls($expired ? $this->expiredServerCert : $this->serverCert, $this->serverKey, $this->ca, $clientCertificates, $this->clientCert, $this->clientKey, !$expired);
    }

    /** A CA's key and its certificate, signed by itself, valid a day. */
    private function selfSigned(string $name, string $subject): void
    {
        $this->run(['req', '-x509', '-extensions', 'ca_cert', ...$this->newKey($name), '-subj', "/CN={$subject}", '-days', '1', '-out', "{$this->dir}/{$name}.crt"]);
    }

    /** A new key and a certificate the CA signs for it. */
    private function signed(string $name, string $subject, string $extensions, string $from, string $until): void
    {
        $this->run(['req', '-new', ...$this->newKey($name), '-subj', "/CN={$subject}", '-out', "{$this->dir}/{$name}.csr"]);
        $this->sign($name, $name, $extensions, $from, $until);
    }

    /** The CA signs the request of $request's key as the certificate $name, valid from $from until $until (YYYYMMDDHHMMSSZ). */
    private function sign(string $request, string $name, string $extensions, string $from, string $until): void
    {
        $this->run([
            'ca', '-batch', '-notext', '-cert', $this->ca, '-keyfile', "{$this->dir}/ca.key", '-extensions', $extensions,
            '-startdate', $from, '-enddate', $until, '-in', "{$this->dir}/{$request}.csr", '-out', "{$this->dir}/{$name}.crt",
        ]);
    }

    /** @return list<string> the arguments of `openssl req` making the unencrypted P-256 key $name.key */
    private function newKey(string $name): array
    {
        return ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', "{$this->dir}/{$name}.key"];
    }

    /** @param list<string> $args */
    private function run(array $args): void
    {
        $run = Command::run([(string) self::openssl(), $args[0], '-config', "{$this->dir}/openssl.cnf", ...\array_slice($args, 1)], timeout: 30.0);
        if ($run['exit'] !== 0) {
            throw new \RuntimeException('openssl ' . \implode(' ', $args) . " failed:\n" . $run['stderr']);
        }
    }
}
