<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Ganesha;

use PHPUnit\Framework\Attributes\DataProvider;
use Zeusi\GaneshaShmAdapter\Tests\Support\Php;

/**
 * setContext() sees each setting of Ganesha's own Configuration as the setting's getter returns
 * it, whatever form it is stored in: a Configuration made without the Builder may store '60'
 * or 60.0 where its `: int` getter, in Ganesha's coercive typing mode, returns 60. What the
 * getter returns, the adapter must use as if that int were stored (with the getter's
 * deprecations); what it throws on, setContext() refuses with an InvalidArgumentException whose
 * previous exception is the getter's. A threshold or interval to half-open that is not set (null,
 * as Ganesha's own isset() checks tell) is none, as an absent one. Each case
 * (scripts/configuration_cases.php) is run under valgrind's memcheck in one process
 * (scripts/configuration.php), or without it where valgrind is not installed.
 */
final class ConfigurationTest extends GaneshaTestCase
{
    /** @var array{exit: int, stdout: string, stderr: string}|null the run of the script, whose report is by case */
    private static ?array $run = null;

    /** @var array<string, array<string, mixed>>|null */
    private static ?array $report = null;

    /** @return iterable<string, array{string}> */
    public static function cases(): iterable
    {
        foreach (\array_keys(require __DIR__ . '/scripts/configuration_cases.php') as $case) {
            yield $case => [$case];
        }
    }

    /**
     * @dataProvider cases
     */
    #[DataProvider('cases')]
    public function testASettingIsWhatItsGetterReturns(string $case): void
    {
        $report = self::report()[$case];
        $getter = $report['getter'];
        $actual = $report['actual'];

        if ($report['reference'] === null) {
            self::assertNotNull($getter['thrown']);
            [$class, $message] = $getter['thrown'];
            self::assertSame('InvalidArgumentException', $actual['thrown'][0] ?? null, \json_encode($actual));
            self::assertStringContainsString("() threw {$class}", $actual['thrown'][1]);
            self::assertSame([$class, $message], \array_slice($actual['thrown'], 2), 'the getter\'s exception, as the previous one');
            self::assertSame($getter['errors'], $actual['errors']);

            return;
        }
        self::assertSame([], $report['reference']['errors']);
        self::assertSame($getter['thrown'] === null ? $getter['errors'] : [], $actual['errors'], 'the getter\'s deprecations');
        self::assertSame($report['reference']['thrown'], $actual['thrown']);
        self::assertSame($report['reference']['observed'], $actual['observed'], 'what the adapter shows, as with the int the getter returns');
    }

    /** @return array<string, array<string, mixed>> */
    private static function report(): array
    {
        // One run for every case, kept whatever it gave (see Native\CoercionTest).
        if (self::$run === null) {
            $script = [__DIR__ . '/scripts/configuration.php'];
            self::$run = Php::underMemcheck($script)
                ?? Php::run('', ['extension' => Php::extensionPath(), 'display_errors' => 'stderr'], $script);
        }
        // memcheck's own errors exit with 99.
        self::assertSame(0, self::$run['exit'], self::$run['stderr'] . "\n" . self::$run['stdout']);

        return self::$report ??= \json_decode(self::$run['stdout'], true, 512, \JSON_THROW_ON_ERROR);
    }
}
