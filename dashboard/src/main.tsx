/** The dashboard's entry: the style nonce first (before any library makes a style), then the app. */
import { render } from 'preact';
import { App } from './app.tsx';
import { adoptStyleNonce } from './style-nonce.ts';
import './styles.css';

adoptStyleNonce();
render(<App />, document.getElementById('app')!);
