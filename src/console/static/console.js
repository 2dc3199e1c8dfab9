// The console's few live parts, as one small module served from our origin (the CSP allows no
// inline script). Every page works without it; it only adds polling, copying and a live price.

for (const button of document.querySelectorAll('[data-copy]')) {
  button.addEventListener('click', async () => {
    const text = document.getElementById(button.dataset.copy)?.textContent ?? '';
    const status = button.parentElement?.querySelector('[data-copied]');
    try {
      await navigator.clipboard.writeText(text);
      if (status) status.textContent = 'Copied.';
    } catch {
      if (status) status.textContent = 'Select the key and copy it.';
    }
  });
}

for (const form of document.querySelectorAll('form[data-confirm]')) {
  form.addEventListener('submit', (event) => {
    if (!window.confirm(form.dataset.confirm)) event.preventDefault();
  });
}

for (const form of document.querySelectorAll('form[data-model-switch]')) {
  form.querySelector('select')?.addEventListener('change', () => form.submit());
}

// A generation still queued: ask where it stands every 2 s, and show the result once it has one.
const live = document.querySelector('[data-live-status]');
if (live) {
  const statusEl = live.querySelector('[data-status]');
  const stepEl = live.querySelector('[data-step]');
  const poll = async () => {
    try {
      const response = await fetch(live.dataset.liveStatus, { headers: { accept: 'application/json' } });
      if (response.ok) {
        const state = await response.json();
        if (stepEl && state.step) stepEl.textContent = state.step.replace(/_/g, ' ');
        if (state.status !== 'queued') {
          if (statusEl) statusEl.textContent = state.status;
          window.location.reload();
          return;
        }
      }
    } catch {
      // The next poll tries again.
    }
    setTimeout(poll, 2000);
  };
  setTimeout(poll, 1000);
}

// The playground's price follows its options, quoted by the server as the API would quote it.
const playground = document.querySelector('form[data-playground]');
if (playground) {
  const price = playground.querySelector('[data-price]');
  playground.addEventListener('change', async (event) => {
    if (!(event.target instanceof HTMLElement) || !event.target.matches('[data-priced]')) return;
    const query = new URLSearchParams();
    for (const field of playground.querySelectorAll('[data-priced], input[name="model"]')) {
      if (field.type === 'checkbox') {
        if (field.checked) query.set(field.name, 'on');
      } else query.set(field.name, field.value);
    }
    const response = await fetch(`${playground.dataset.quote}?${query}`);
    if (response.ok && price) {
      const { credits } = await response.json();
      price.textContent = credits === null ? '—' : String(credits);
    }
  });
  // One submission per rendered form; the server's Idempotency-Key makes a second one harmless anyway.
  playground.addEventListener('submit', () => {
    const button = playground.querySelector('[data-submit-once]');
    setTimeout(() => button?.setAttribute('disabled', ''), 0);
  });
}
