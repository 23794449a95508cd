/**
 * A browser-agent run's steps as a timeline: each step's action, thought, URL and screenshot
 * (a button enlarges it). With a recording, a step's "Play from here" moves the player to it,
 * and the step the player shows is marked as current.
 */
import type { Step } from '@agent-task-service/client';
import { useState } from 'preact/hooks';
import { formatDuration } from '../lib/format.ts';
import { ImageDialog } from './image-dialog.tsx';

function clock(seconds: number): string {
  const s = Math.floor(seconds);
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
}

export function StepCard({ step, current, offset, onPlay, onImageError }: { step: Step; current: boolean; offset: number | null; onPlay?: (step: Step) => void; onImageError?: () => void }) {
  const [enlarged, setEnlarged] = useState(false);
  const alt = `Screenshot after step ${step.number}`;
  return (
    <li class={`step ${current ? 'step-current' : ''}`} aria-current={current ? 'step' : undefined} data-step={step.number}>
      <div class="step-num" aria-hidden="true">
        {step.number}
      </div>
      <div class="step-body">
        <h3 class="step-action">
          <span class="visually-hidden">Step {step.number}: </span>
          {step.action}
        </h3>
        {step.thought && <p class="step-thought">{step.thought}</p>}
        <p class="step-meta">
          {step.url && (
            <a class="step-url mono" href={step.url} target="_blank" rel="noopener noreferrer">
              {step.url}
            </a>
          )}
          <span class="muted">{formatDuration(step.durationMs)}</span>
          {onPlay && offset !== null && (
            <button type="button" class="btn btn-small" onClick={() => onPlay(step)} aria-label={`Play from ${clock(offset)} (step ${step.number})`}>
              <span aria-hidden="true">▶ </span>
              {clock(offset)}
            </button>
          )}
        </p>
      </div>
      {step.screenshotUrl && (
        <button type="button" class="step-shot" onClick={() => setEnlarged(true)} aria-label={`Enlarge the screenshot of step ${step.number}`}>
          <img src={step.screenshotUrl} alt={alt} loading="lazy" decoding="async" onError={onImageError} />
        </button>
      )}
      {enlarged && step.screenshotUrl && <ImageDialog src={step.screenshotUrl} alt={alt} onClose={() => setEnlarged(false)} />}
    </li>
  );
}

export function RunTimeline({
  steps,
  current,
  offsetOf,
  onPlay,
  onImageError,
  live,
}: {
  steps: Step[];
  current: number | null;
  offsetOf: (s: Step) => number | null;
  onPlay?: (s: Step) => void;
  /** A screenshot did not load: its link may have expired (they last 15 minutes). */
  onImageError?: () => void;
  live: boolean;
}) {
  return (
    <ol class="timeline" aria-label="Steps" aria-live={live ? 'polite' : undefined} aria-relevant="additions">
      {steps.map((s) => (
        <StepCard key={s.number} step={s} current={current === s.number} offset={offsetOf(s)} onPlay={onPlay} onImageError={onImageError} />
      ))}
    </ol>
  );
}
