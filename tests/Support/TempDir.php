<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Support;

/**
 * Scratch directories of the tests, and their removal.
 */
final class TempDir
{
    /** A new directory named $stem + random hex, in $in (default: the system's temporary directory). */
    public static function create(string $stem, ?string $in = null): string
    {
        $dir = ($in ?? \sys_get_temp_dir()) . '/' . $stem . \bin2hex(\random_bytes(5));
        if (!\mkdir($dir, 0700)) {
            throw new \RuntimeException("Could not create {$dir}");
        }

        return $dir;
    }

    /** Removes $path and everything below it, without following symlinks. */
    public static function remove(string $path): void
    {
        if (\is_link($path) || \is_file($path) || (\file_exists($path) && !\is_dir($path))) {
            @\unlink($path);

            return;
        }
        if (!\is_dir($path)) {
            return;
        }
        foreach (\scandir($path) ?: [] as $entry) {
            if ($entry !== '.' && $entry !== '..') {
                self::remove($path . '/' . $entry);
            }
        }
        @\rmdir($path);
    }

}
