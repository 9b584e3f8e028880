<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Observability;

use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\Tests\Support\Php;

/**
 * The Debian package's /etc/php/<ver>/mods-available/ganesha_shm.ini (packaging/debian): it
 * loads the extension and nothing else, and documents every setting the extension registers,
 * commented, with its default and a comment above it, so that it follows the extension's
 * settings when they change.
 */
final class ModsAvailableIniTest extends TestCase
{
    public function testItLoadsTheExtensionAndDocumentsEverySettingWithItsDefault(): void
    {
        $defaults = Php::json('echo json_encode(ini_get_all("ganesha_shm", false));');
        self::assertNotSame([], $defaults, 'the extension registers no setting');
        $ini = (string) \file_get_contents(PackageCopy::root() . '/packaging/debian/ganesha_shm.ini');
        $lines = \explode("\n", \rtrim($ini, "\n"));

        $active = \array_values(\array_filter($lines, static fn (string $line): bool => \trim($line) !== '' && !\str_starts_with(\trim($line), ';')));
        self::assertSame(['extension=ganesha_shm.so'], $active, 'the ini sets something else than the extension');

        // uncommented, the settings parse to the extension's defaults, all of them
        $uncommented = (string) \preg_replace('/^;(ganesha_shm\.)/m', '$1', $ini);
        $parsed = \parse_ini_string($uncommented, false, \INI_SCANNER_RAW);
        self::assertIsArray($parsed);
        unset($parsed['extension']);
        \ksort($parsed);
        \ksort($defaults);
        self::assertSame($defaults, $parsed, 'the commented settings and their defaults');

        // each comes after a comment of its own: what it means and costs
        foreach (\array_keys($defaults) as $name) {
            self::assertMatchesRegularExpression(
                '/(^; \S[^\n]*\n){2,}^;' . \preg_quote($name, '/') . ' =/m',
                $ini,
                "{$name} has no comment of at least two lines above it"
            );
        }
    }
}
