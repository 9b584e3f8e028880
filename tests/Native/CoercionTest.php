<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Native;

use PHPUnit\Framework\Attributes\DataProvider;
use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\Tests\Support\Php;

/**
 * The class's `string` and `int` parameters take what PHP gives a method declaring them, in
 * the caller's typing mode: in coercive mode an int, a float, a bool or a Stringable object for
 * a string, a numeric string, an integral float or a bool for an int, with PHP's deprecations;
 * in strict mode nothing else. Each call is made on the extension's class and on a userland
 * twin declaring the same parameters, and must throw what the twin throws, raise what it raises
 * and, when the twin accepts it, do what the extension does with the values the twin was given.
 * One exception, PHP's own: null for a parameter that is not nullable, which PHP takes with a
 * deprecation for an internal function's (the extension's) and refuses for a userland one: it
 * must do what PHP's own functions do. The hot methods and the generated ones alike
 * (scripts/coercion/cases.php), run under valgrind's memcheck in one process
 * (scripts/coercion.php), or without it where valgrind is not installed.
 */
final class CoercionTest extends TestCase
{
    /** @var array{exit: int, stdout: string, stderr: string}|null the run of the script, whose report is by mode and case */
    private static ?array $run = null;

    /** @var array<string, array<string, array<string, mixed>>>|null */
    private static ?array $report = null;

    /** @return iterable<string, array{string, string}> */
    public static function cases(): iterable
    {
        foreach (['coercive', 'strict'] as $mode) {
            foreach (\array_keys(require __DIR__ . '/scripts/coercion/cases.php') as $case) {
                yield "{$case}, {$mode}" => [$case, $mode];
            }
        }
    }

    /**
     * @dataProvider cases
     */
    #[DataProvider('cases')]
    public function testAnArgumentIsTakenAsPhpTakesItForAMethodOfTheSameSignature(string $case, string $mode): void
    {
        $report = self::report()[$mode][$case];
        $expected = $report['expected'];
        $actual = $report['actual'];

        self::assertSame($expected['errors'], $actual['errors'], 'the errors PHP raised');
        if ($report['reference'] === null) {
            self::assertNotNull($expected['thrown']);
            self::assertSame($expected['thrown'], $actual['thrown'], 'refused as PHP refuses it');

            return;
        }
        self::assertNull($expected['thrown']);
        self::assertSame([], $report['reference']['errors']);
        self::assertSame($report['reference']['thrown'], $actual['thrown'], 'the call with the values PHP converts it to');
        self::assertSame($report['reference']['observed'], $actual['observed'], 'what the call did, read back with the values PHP converts it to');
    }

    /** @return array<string, array<string, array<string, mixed>>> */
    private static function report(): array
    {
        // One run for every case, kept whatever it gave, so that a failed run fails each case
        // at once instead of running again for it.
        if (self::$run === null) {
            $script = [__DIR__ . '/scripts/coercion.php'];
            self::$run = Php::underMemcheck($script)
                ?? Php::run('', ['extension' => Php::extensionPath(), 'display_errors' => 'stderr'], $script);
        }
        // memcheck's own errors exit with 99.
        self::assertSame(0, self::$run['exit'], self::$run['stderr'] . "\n" . self::$run['stdout']);

        return self::$report ??= \json_decode(self::$run['stdout'], true, 512, \JSON_THROW_ON_ERROR);
    }
}
