<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Support;

/**
 * What Linux's /proc says about the servers the tests start: a process's children, its
 * mappings of the extension's segment, and the memory figures of its status file.
 */
final class ProcFs
{
    /**
     * The name the extension gives its anonymous segment's memfd (crates/core/src/segment.rs); the mapping
     * shows in /proc/<pid>/maps as `/memfd:ganesha_shm (deleted)`.
     */
    public const MEMFD_NAME = 'ganesha_shm';

    /**
     * The children of process $parent, read from /proc; sorted.
     *
     * @return list<int>
     */
    public static function children(int $parent): array
    {
        $children = [];
        foreach (\glob('/proc/[0-9]*/stat') ?: [] as $stat) {
            $line = @\file_get_contents($stat);
            // pid (comm) state ppid ...; comm may hold spaces and parentheses
            if ($line !== false && \preg_match('/^\) \S (\d+) /', (string) \strrchr($line, ')'), $m) === 1 && (int) $m[1] === $parent) {
                $children[] = (int) \basename(\dirname($stat));
            }
        }
        \sort($children);

        return $children;
    }

    /** Whether process $pid exists and is not a zombie. */
    public static function alive(int $pid): bool
    {
        $line = @\file_get_contents("/proc/{$pid}/stat");

        return \is_string($line) && \preg_match('/^\) ([^ZX]) /', (string) \strrchr($line, ')')) === 1;
    }

    /**
     * How many mappings of process $pid are a ganesha_shm segment: the anonymous one's memfd,
     * or the file $path when one is given, also once deleted, and also under the temporary name
     * the process that created the file mapped it by (`.name.pid.nanos.tmp` in the same
     * directory, linked to $path and removed: `… (deleted)`). The extension's shared object,
     * whose lines hold "ganesha_shm" too (libganesha_shm.so), is not counted.
     */
    public static function segmentMappings(int $pid, ?string $path = null): int
    {
        $count = 0;
        foreach (self::mapLines($pid) as $line) {
            // address perms offset dev inode pathname; the pathname may hold spaces
            $fields = \preg_split('/\s+/', \trim($line), 6);
            if (self::isSegment($fields[5] ?? '', $path)) {
                ++$count;
            }
        }

        return $count;
    }

    /**
     * The memory the segments process $pid maps hold, in kB, or null when it cannot be read:
     * the blocks allocated to each distinct file behind its segment mappings (a memfd's pages,
     * whoever touched them; for a segment file, its blocks on its file system), read through
     * /proc/<pid>/map_files, which only root may read. Unlike RssShmem, which counts the pages
     * the process itself touched, this counts what a mapping keeps alive.
     */
    public static function segmentBlocksKb(int $pid, ?string $path = null): ?int
    {
        $files = [];
        foreach (self::mapLines($pid) as $line) {
            $fields = \preg_split('/\s+/', \trim($line), 6);
            if (self::isSegment($fields[5] ?? '', $path)) {
                $stat = @\stat("/proc/{$pid}/map_files/{$fields[0]}");
                if (!\is_array($stat)) {
                    return null;
                }
                $files[$stat['dev'] . ':' . $stat['ino']] = \intdiv($stat['blocks'] * 512, 1024);
            }
        }

        return \array_sum($files);
    }

    /** A figure of /proc/$pid/status given in kB (RssShmem, VmRSS, …). */
    public static function statusKb(int $pid, string $field): int
    {
        $status = @\file_get_contents("/proc/{$pid}/status");
        if (!\is_string($status) || \preg_match('/^' . \preg_quote($field, '/') . ':\s+(\d+) kB$/m', $status, $m) !== 1) {
            throw new \RuntimeException("/proc/{$pid}/status has no {$field}");
        }

        return (int) $m[1];
    }

    /** Whether $pathname, of a line of /proc/<pid>/maps, is a segment (segmentMappings()). */
    private static function isSegment(string $pathname, ?string $path): bool
    {
        $pattern = '/^\/memfd:' . \preg_quote(self::MEMFD_NAME, '/') . '( \(deleted\))?$/';
        if ($path !== null) {
            $pattern = \sprintf(
                '/^(\/memfd:%s|%s|%s\/\.%s\.\d+\.\d+\.tmp)( \(deleted\))?$/',
                \preg_quote(self::MEMFD_NAME, '/'),
                \preg_quote($path, '/'),
                \preg_quote(\dirname($path), '/'),
                \preg_quote(\basename($path), '/')
            );
        }

        return \preg_match($pattern, $pathname) === 1;
    }

    /** @return list<string> */
    private static function mapLines(int $pid): array
    {
        $maps = @\file_get_contents("/proc/{$pid}/maps");
        if (!\is_string($maps)) {
            throw new \RuntimeException("Cannot read /proc/{$pid}/maps");
        }

        return \array_values(\array_filter(\explode("\n", $maps), static fn (string $line): bool => $line !== ''));
    }
}
