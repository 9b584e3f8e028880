<?php

declare(strict_types=1);

/*
 * The calls of scripts/coercion.php in PHP's strict typing mode: this file declares
 * strict_types, and a call's typing mode is that of the file it is written in.
 */

namespace Zeusi\GaneshaShmAdapter\Tests\Native\Coercion\Strict;

/** @param list<mixed> $arguments */
function call(object $object, string $method, array $arguments): mixed
{
    return $object->{$method}(...$arguments);
}

/** @param list<mixed> $arguments */
function construct(string $class, array $arguments): object
{
    return new $class(...$arguments);
}

/** @param list<mixed> $arguments */
function call_function(string $function, array $arguments): mixed
{
    return $function(...$arguments);
}
