// Validates an OpenAPI document (YAML or JSON) against the official OpenAPI
// 3.1 JSON Schema with @seriousme/openapi-schema-validator, and checks that
// every $ref resolves. Usage: node validate.mjs docs/openapi.yaml
import {Validator} from '@seriousme/openapi-schema-validator';

const file = process.argv[2];
if (!file) {
  console.error('usage: node validate.mjs OPENAPI_FILE');
  process.exit(2);
}
const validator = new Validator();
const res = await validator.validate(file);
if (validator.version !== '3.1') {
  console.error(`${file}: OpenAPI ${validator.version}, expected 3.1`);
  process.exit(1);
}
if (!res.valid) {
  console.error(`${file}: not a valid OpenAPI 3.1 document:`);
  console.error(JSON.stringify(res.errors, null, 2));
  process.exit(1);
}
try {
  validator.resolveRefs();
} catch (e) {
  console.error(`${file}: a $ref does not resolve: ${e.message}`);
  process.exit(1);
}
console.log(`${file}: valid OpenAPI ${validator.version}`);
