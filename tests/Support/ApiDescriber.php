<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Support;

/**
 * A comparable description, built with Reflection, of classes and functions: the same for the
 * stubs (declared in PHP, reflected in a child process without the extension) and for what
 * the extension registers. No autoloading needed: child processes require this file.
 */
final class ApiDescriber
{
    /**
     * @param list<string> $classes
     * @param list<string> $functions
     * @return array{classes: array<string, mixed>, functions: array<string, mixed>}
     */
    public static function describe(array $classes, array $functions): array
    {
        $described = ['classes' => [], 'functions' => []];
        foreach ($classes as $class) {
            $reflection = new \ReflectionClass($class);
            $described['classes'][$reflection->getName()] = self::describeClass($reflection);
        }
        foreach ($functions as $function) {
            $reflection = new \ReflectionFunction($function);
            $described['functions'][$reflection->getName()] = self::describeFunction($reflection);
        }
        \ksort($described['classes']);
        \ksort($described['functions']);

        return $described;
    }

    /** @return array<string, mixed> */
    public static function describeClass(\ReflectionClass $class): array
    {
        $constants = [];
        foreach ($class->getReflectionConstants() as $constant) {
            $constants[$constant->getName()] = [
                'value' => \var_export($constant->getValue(), true),
                'public' => $constant->isPublic(),
                'final' => $constant->isFinal(),
            ];
        }
        \ksort($constants);

        $methods = [];
        foreach ($class->getMethods() as $method) {
            $methods[$method->getName()] = self::describeFunction($method) + [
                'class' => $method->getDeclaringClass()->getName(),
                'public' => $method->isPublic(),
                'protected' => $method->isProtected(),
                'static' => $method->isStatic(),
                'abstract' => $method->isAbstract(),
                'final' => $method->isFinal(),
            ];
        }
        \ksort($methods);

        $properties = [];
        foreach ($class->getProperties() as $property) {
            $properties[] = $property->getName();
        }
        \sort($properties);

        $interfaces = $class->getInterfaceNames();
        \sort($interfaces);

        return [
            'kind' => $class->isInterface() ? 'interface' : ($class->isTrait() ? 'trait' : 'class'),
            'abstract' => $class->isAbstract(),
            'final' => $class->isFinal(),
            'parent' => $class->getParentClass() === false ? null : $class->getParentClass()->getName(),
            'interfaces' => $interfaces,
            'constants' => $constants,
            'properties' => $properties,
            'methods' => $methods,
        ];
    }

    /** @return array<string, mixed> */
    public static function describeFunction(\ReflectionFunctionAbstract $function): array
    {
        $parameters = [];
        foreach ($function->getParameters() as $parameter) {
            $hasDefault = $parameter->isDefaultValueAvailable();
            $parameters[] = [
                'name' => $parameter->getName(),
                'type' => self::type($parameter->getType()),
                'allowsNull' => $parameter->allowsNull(),
                'optional' => $parameter->isOptional(),
                'variadic' => $parameter->isVariadic(),
                'byReference' => $parameter->isPassedByReference(),
                'hasDefault' => $hasDefault,
                'default' => $hasDefault ? \var_export($parameter->getDefaultValue(), true) : null,
            ];
        }

        return [
            'name' => $function->getName(),
            'returnType' => self::type($function->getReturnType()),
            'returnsReference' => $function->returnsReference(),
            'requiredParameters' => $function->getNumberOfRequiredParameters(),
            'parameters' => $parameters,
        ];
    }

    private static function type(?\ReflectionType $type): ?string
    {
        return $type === null ? null : (string) $type;
    }
}
