// Package schemacheck checks JSON values against the JSON Schema subset
// kvselect's OpenAPI document uses, and HTTP exchanges against the
// document's operations. It exists for tests: the OpenAPI test validates
// recorded examples with it, and the HTTP tour validates every live answer,
// so the document cannot drift from what the server does.
//
// The subset: $ref (local), type (one name or a list), properties,
// required, additionalProperties (boolean or schema), propertyNames, items,
// minItems, maxItems, enum, const, minimum, maximum, minLength, maxLength,
// pattern, format "date-time", allOf, anyOf and oneOf. Numbers are compared
// exactly (math/big), so the full unsigned 64-bit range of hashes checks
// right. Any other keyword is an error, never silently ignored, so the
// document cannot use a keyword this checker would skip.
//
// In strict mode an object property that the schema does not declare is an
// error even where additionalProperties is absent: the document must
// describe every field the server sends.
package schemacheck
