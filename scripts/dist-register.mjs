/** `node --import ./scripts/dist-register.mjs`: TypeScript run from dist/ (see dist-loader.mjs). */
import { register } from 'node:module';

register('./dist-loader.mjs', import.meta.url);
