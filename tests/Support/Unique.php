<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Support;

/**
 * Names no other test uses: the store lives as long as the PHPUnit process, so every test
 * works on its own keys.
 */
final class Unique
{
    public static function name(string $stem = 't'): string
    {
        return $stem . \bin2hex(\random_bytes(6));
    }
}
