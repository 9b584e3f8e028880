<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Observability;

use Zeusi\GaneshaShmAdapter\Tests\Support\Command;
use Zeusi\GaneshaShmAdapter\Tests\Support\TempDir;

/**
 * Headless Chromium (Debian's /usr/bin/chromium), each run with a new profile directory.
 */
final class Chromium
{
    public const BINARY = '/usr/bin/chromium';
    private const TIMEOUT_S = 60.0;

    public function __construct(private readonly string $scratch)
    {
    }

    public static function missing(): ?string
    {
        return \is_executable(self::BINARY)
            ? null
            : self::BINARY . ' is missing: the browser test needs headless Chromium (apt-get install chromium; .ci/install-deps installs it)';
    }

    /** Loads $url in a window of $width×$height pixels and writes a PNG of it to $png. */
    public function screenshot(string $url, string $png, int $width = 1000, int $height = 700): void
    {
        $result = $this->run(["--window-size={$width},{$height}", '--hide-scrollbars', '--screenshot=' . $png, $url]);
        if (!\is_file($png) || \filesize($png) === 0) {
            throw new \RuntimeException("chromium wrote no screenshot to {$png} (exit {$result['exit']}):\n{$result['stderr']}");
        }
    }

    /**
     * Loads $url and returns its DOM, serialized after the page loaded; with $virtualTimeMs,
     * after that much virtual time has run the page's timers (and the fetches they start).
     */
    public function dumpDom(string $url, int $virtualTimeMs = 0): string
    {
        $args = $virtualTimeMs > 0 ? ['--virtual-time-budget=' . $virtualTimeMs] : [];
        $result = $this->run([...$args, '--dump-dom', $url]);
        if ($result['exit'] !== 0 || \trim($result['stdout']) === '') {
            throw new \RuntimeException("chromium --dump-dom {$url} failed (exit {$result['exit']}):\n{$result['stderr']}");
        }

        return $result['stdout'];
    }

    /**
     * @param list<string> $args
     * @return array{exit: int, stdout: string, stderr: string}
     */
    private function run(array $args): array
    {
        $profile = TempDir::create('chromium-profile-', $this->scratch);
        $home = TempDir::create('chromium-home-', $this->scratch);

        return Command::run(
            [
                self::BINARY,
                '--headless',
                '--no-sandbox',
                '--disable-gpu',
                '--disable-quic',
                '--no-first-run',
                '--disable-background-networking',
                '--disable-component-update',
                '--disable-sync',
                '--user-data-dir=' . $profile,
                ...$args,
            ],
            $this->scratch,
            Command::env(['HOME' => $home]),
            self::TIMEOUT_S,
        );
    }
}
