<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Fleet;

use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\Tests\Support\Command;

/**
 * The sync script (crates/fleet/src/sync.lua) as luacheck reads it: every variable declared,
 * and none read before it is, since Redis stops a script at such a read, after the writes it
 * made, and keeps them. luacheck (Debian's lua-check) is installed by .ci/install-deps.
 */
final class FleetScriptTest extends TestCase
{
    private const SCRIPT = __DIR__ . '/../../crates/fleet/src/sync.lua';

    public function testTheSyncScriptDeclaresEveryVariableItUses(): void
    {
        $run = $this->luacheck(self::SCRIPT);
        self::assertSame(0, $run['exit'], "luacheck's findings:\n{$run['stdout']}{$run['stderr']}");
        self::assertStringContainsString('0 warnings / 0 errors', $run['stdout']);
    }

    public function testLuacheckFindsAVariableReadBeforeItIsDeclared(): void
    {
        $run = $this->luacheck(__DIR__ . '/fixtures/undeclared_global.lua');
        self::assertNotSame(0, $run['exit'], $run['stdout']);
        self::assertStringContainsString("accessing undefined variable 'longest'", $run['stdout']);
    }

    /**
     * luacheck over $file, with what Redis gives a script: Lua 5.1's globals, redis, cmsgpack,
     * KEYS and ARGV, and nothing else.
     *
     * @return array{exit: int, stdout: string, stderr: string}
     */
    private function luacheck(string $file): array
    {
        if (Command::which('luacheck') === null) {
            self::markTestSkipped('luacheck is not installed (apt-get install lua-check)');
        }

        return Command::run(['luacheck', '--no-color', '--std', 'lua51', '--globals', 'redis', 'cmsgpack', 'KEYS', 'ARGV', '--', $file], timeout: 60.0);
    }
}
