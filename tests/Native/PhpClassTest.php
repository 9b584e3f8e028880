<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Native;

use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\Tests\Support\Php;

/**
 * php/SlidingTimeWindowShm.php without the extension tells how to load it.
 */
final class PhpClassTest extends TestCase
{
    public function testWithoutTheExtensionTheClassFileThrowsALogicExceptionNamingExtension(): void
    {
        $code = \sprintf(
            'try { require %s; echo json_encode(["thrown" => null]); }
            catch (\\Throwable $e) { echo json_encode(["thrown" => get_class($e), "message" => $e->getMessage(),
                "declared" => class_exists("Zeusi\\\\GaneshaShmAdapter\\\\SlidingTimeWindowShm", false),
                "loaded" => extension_loaded("ganesha_shm")]); }',
            \var_export(\dirname(__DIR__, 2) . '/php/SlidingTimeWindowShm.php', true)
        );

        $result = Php::json($code, [], false);

        self::assertFalse($result['loaded'] ?? null, 'the child process runs without the extension');
        self::assertSame(\LogicException::class, $result['thrown']);
        self::assertStringContainsString('extension=', $result['message']);
        self::assertStringContainsString('vendor/bin/ganesha-shm-install', $result['message'], 'it names the installer');
        self::assertStringContainsString('ganesha_shm', $result['message']);
        self::assertFalse($result['declared']);
    }

    public function testWithoutTheExtensionNothingIsDeclared(): void
    {
        $result = Php::json(
            'echo json_encode([class_exists("Zeusi\\\\GaneshaShmAdapter\\\\AbstractSlidingTimeWindowShm"), function_exists("ganesha_shm_info"), ini_get("ganesha_shm.max_services")]);',
            [],
            false
        );

        self::assertSame([false, false, false], $result);
    }
}
