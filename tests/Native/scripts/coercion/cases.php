<?php

/*
 * The calls of CoercionTest, which scripts/coercion.php makes and the test names: each method of
 * the class with a `string` or `int` parameter, given in that parameter each value below, its
 * other arguments valid.
 *
 * Returns name => [method, parameter index, value, whether the error handler throws PHP's
 * deprecations as ErrorException].
 */

declare(strict_types=1);

$stringable = new class () {
    public function __toString(): string
    {
        return 'coercion_stringable';
    }
};
$throwing = new class () {
    public function __toString(): string
    {
        throw new \RuntimeException('__toString() threw');
    }
};
$strings = [
    'a string' => ['coercion_plain', false],
    'an int' => [42, false],
    'a negative int' => [-7, false],
    'a float' => [4.5, false],
    'a large float' => [1.0e100, false],
    'an integral float' => [2.0, false],
    'true' => [true, false],
    'false' => [false, false],
    'null' => [null, false],
    'null, its deprecation thrown by the error handler' => [null, true],
    'a Stringable object' => [$stringable, false],
    'a Stringable object whose __toString() throws' => [$throwing, false],
    'an object' => [new \stdClass(), false],
    'an array' => [['k'], false],
    'a resource' => [\STDIN, false],
];
$ints = [
    'an int' => [2, false],
    'a numeric string' => ['2', false],
    'a numeric string with leading whitespace' => [' 2', false],
    'a numeric string with trailing whitespace' => ['2 ', false],
    'an integral float string' => ['2.0', false],
    'an exponent string' => ['1e3', false],
    'a fractional float string' => ['2.5', false],
    'an integral float' => [2.0, false],
    'a fractional float' => [2.5, false],
    'a fractional float, its deprecation thrown by the error handler' => [2.5, true],
    'true' => [true, false],
    'false' => [false, false],
    'null' => [null, false],
    'a non-numeric string' => ['abc', false],
    'a leading-numeric string' => ['2abc', false],
    'an empty string' => ['', false],
    'a hexadecimal string' => ['0x1A', false],
    'a float out of the int range' => [1.0e30, false],
    'NAN' => [\NAN, false],
    'an array' => [[2], false],
    'an object' => [new \stdClass(), false],
    'a Stringable object' => [$stringable, false],
];
$parameters = [
    'load' => ['string'],
    'increment' => ['string'],
    'loadStatus' => ['string'],
    'loadLastFailureTime' => ['string'],
    'saveLastFailureTime' => ['string', 'int'],
    'saveStatus' => ['string', 'int'],
    'resetService' => ['string'],
    'save' => ['string', 'int'],
    'decrement' => ['string'],
    '__construct' => ['int'],
];

$cases = [];
foreach ($parameters as $method => $types) {
    foreach ($types as $index => $type) {
        foreach ($type === 'string' ? $strings : $ints as $label => [$value, $deprecationsThrow]) {
            $cases[\sprintf('%s() #%d %s', $method, $index + 1, $label)] = [$method, $index, $value, $deprecationsThrow];
        }
    }
}

return $cases;
