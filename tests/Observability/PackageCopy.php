<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Observability;

use Zeusi\GaneshaShmAdapter\Tests\Support\Command;
use Zeusi\GaneshaShmAdapter\Tests\Support\Php;

/**
 * This package as Composer or a source download delivers it, for the install tests: the
 * checkout's files without what git ignores at the top level (build output, installs, phpize's
 * output), and a cargo target directory holding the compiled dependencies of the current build.
 */
final class PackageCopy
{
    /** The checkout the tests run from. */
    public static function root(): string
    {
        return \dirname(__DIR__, 2);
    }

    /** Copies the package into $to (created): every entry but .git and .gitignore's top-level ones. */
    public static function create(string $to): string
    {
        self::copyTree(self::root(), $to, self::notPackaged());

        return $to;
    }

    /** The version of Cargo.toml's [package], which the extension reports. */
    public static function version(): string
    {
        $manifest = (string) \file_get_contents(self::root() . '/Cargo.toml');
        if (\preg_match('/^\[package\][^\[]*?^version\s*=\s*"([^"]+)"/ms', $manifest, $m) !== 1) {
            throw new \RuntimeException('No version in the [package] of Cargo.toml');
        }

        return $m[1];
    }

    /**
     * Copies the compiled dependencies of the release build the tests run (the directory of
     * GANESHA_SHM_EXT: deps, build scripts' output and cargo's fingerprints, modification times
     * kept) into $target, so that cargo compiles only the extension's own crate, from the copied
     * sources (about 20 s instead of 2 minutes here). Without such a build, cargo builds everything.
     */
    public static function seedCargoTarget(string $target): void
    {
        $release = \dirname(Php::extensionPath());
        \mkdir($target . '/release', 0777, true);
        if (\basename($release) !== 'release') {
            return;
        }
        $parts = \array_values(\array_filter(
            [$release . '/deps', $release . '/build', $release . '/.fingerprint'],
            'is_dir'
        ));
        if (\count($parts) === 3) {
            Command::run(['cp', '-a', ...$parts, $target . '/release/'], null, null, 120.0);
        }
    }

    /** @return list<string> top-level entries of the checkout that are not part of the package */
    private static function notPackaged(): array
    {
        $skip = ['.git'];
        foreach (\file(self::root() . '/.gitignore', \FILE_IGNORE_NEW_LINES) ?: [] as $line) {
            if (\preg_match('{^/([^/*?\[]+)/?$}', \trim($line), $m) === 1) {
                $skip[] = $m[1];
            }
        }

        return $skip;
    }

    /** @param list<string> $skip top-level entries to leave out */
    private static function copyTree(string $from, string $to, array $skip = []): void
    {
        \mkdir($to, 0777, true);
        foreach (\scandir($from) ?: [] as $entry) {
            if ($entry === '.' || $entry === '..' || \in_array($entry, $skip, true)) {
                continue;
            }
            $source = $from . '/' . $entry;
            if (\is_link($source)) {
                \symlink((string) \readlink($source), $to . '/' . $entry);
            } elseif (\is_dir($source)) {
                self::copyTree($source, $to . '/' . $entry);
            } else {
                \copy($source, $to . '/' . $entry);
                \chmod($to . '/' . $entry, \fileperms($source) & 0777);
            }
        }
    }
}
