// The memory console page: plain ES2020, no framework, no build step.
//
// Two rules hold everywhere below:
// - Memory text is attacker-controlled (a conversation can put anything into a fact), so data
//   only ever reaches the page as text: `el()` and `textContent`, never `innerHTML`. The
//   Content-Security-Policy (script and style from this origin only) is the second fence.
// - URLs are relative (`api/users`, never `/api/users`) so the console works mounted under any
//   prefix of a host app.
'use strict';

(() => {
  // -- state ------------------------------------------------------------------------------------

  const FACT_CATEGORIES = ['preference', 'knowledge', 'context', 'behavior', 'goal', 'correction'];
  const STATUS_LABELS = {
    all: 'All statuses',
    active: 'Active (used by the agent)',
    superseded: 'Superseded (replaced by a newer fact)',
    archived: 'Archived (expired or retired)',
  };
  const SECTION_LABELS = {
    workContext: 'Work',
    personalContext: 'Personal',
    topOfMind: 'Top of mind',
    recentMonths: 'Recent months',
    earlierContext: 'Earlier',
    longTermBackground: 'Long-term background',
  };
  const ACTION_LABELS = {
    'fact.add': 'added a fact',
    'fact.edit': 'edited a fact',
    'fact.delete': 'deleted a fact',
    import: 'imported memory',
    forget: 'forgot the user',
  };
  const FIELD_LABELS = {
    content: 'Text',
    category: 'Category',
    confidence: 'Confidence',
    status: 'Status',
    eventAt: 'Event date',
    validUntil: 'Valid until',
  };

  const state = {
    session: null, // {operator, role, users, csrf, agent}: from GET api/session
    user: null,
    agents: [],
    agent: null,
    tab: 'facts',
    users: { q: '', offset: 0, limit: 20, total: 0 },
    facts: { q: '', status: 'all', category: '', sort: 'updated', offset: 0, limit: 25, total: 0 },
    audit: { offset: 0, limit: 20, total: 0 },
    // Each load takes a ticket; an answer whose ticket is no longer the latest is dropped, so a
    // slow answer for the previous user never paints over the current one.
    tickets: {},
  };

  const $ = (id) => document.getElementById(id);

  function ticket(name) {
    state.tickets[name] = (state.tickets[name] || 0) + 1;
    const mine = state.tickets[name];
    return () => state.tickets[name] === mine;
  }

  function canEdit() {
    return Boolean(state.session && state.session.role === 'edit');
  }

  // -- building the page safely -------------------------------------------------------------------

  // el('p', {className: 'x', testid: 'y', on: {click: f}}, 'text', child, ...): strings become
  // text nodes; null/false children are skipped. Nothing is ever parsed as HTML.
  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key === 'on') {
        for (const [event, handler] of Object.entries(value)) node.addEventListener(event, handler);
      } else if (key === 'testid') {
        node.setAttribute('data-testid', value);
      } else if (key === 'className' || key === 'value' || key === 'checked' ||
                 key === 'disabled' || key === 'hidden' || key === 'type' || key === 'id' ||
                 key === 'htmlFor' || key === 'rows' || key === 'required') {
        node[key] = value;
      } else {
        node.setAttribute(key, String(value));
      }
    }
    append(node, children);
    return node;
  }

  function append(node, children) {
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  // replaceChildren that skips null/false like el() does (replaceChildren would print "null").
  function setChildren(node, ...children) {
    node.replaceChildren();
    return append(node, children);
  }

  let uidCounter = 0;
  function uid(prefix) {
    uidCounter += 1;
    return `${prefix}-${uidCounter}`;
  }

  // -- formatting ---------------------------------------------------------------------------------

  function percent(value) {
    return typeof value === 'number' && Number.isFinite(value) ? `${Math.round(value * 100)}%` : '—';
  }

  function decimal(value) {
    return typeof value === 'number' && Number.isFinite(value) ? value.toFixed(2) : '—';
  }

  // "2026-01-01T10:30:00Z" reads as "2026-01-01 10:30 UTC"; partial dates ("2026-05") as given.
  function when(value) {
    if (!value) return '—';
    const m = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2})(?::\d{2}(?:\.\d+)?)?Z$/.exec(value);
    return m ? `${m[1]} ${m[2]} UTC` : String(value);
  }

  function plural(n, one, many) {
    return `${n} ${n === 1 ? one : many || `${one}s`}`;
  }

  function agentLabel(agent) {
    return state.session && agent === state.session.agent ? `${agent} (default agent)` : agent;
  }

  // -- talking to the API -------------------------------------------------------------------------

  class ApiError extends Error {
    constructor(status, message, data) {
      super(message);
      this.status = status;
      this.data = data || null;
    }
  }

  async function api(method, path, params, body) {
    let url = path;
    if (params) {
      const query = new URLSearchParams();
      for (const [key, value] of Object.entries(params)) {
        if (value !== undefined && value !== null && value !== '') query.set(key, String(value));
      }
      const text = query.toString();
      if (text) url += `?${text}`;
    }
    const init = { method, headers: { Accept: 'application/json' }, credentials: 'same-origin', cache: 'no-store' };
    if (method !== 'GET') init.headers['X-CSRF-Token'] = (state.session && state.session.csrf) || '';
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch(url, init);
    } catch (err) {
      throw new ApiError(0, 'The console could not be reached. Check that it is still running, then try again.');
    }
    const type = response.headers.get('content-type') || '';
    const data = type.includes('json') ? await response.json().catch(() => null) : null;
    if (!response.ok) {
      let message = `The console answered ${response.status} ${response.statusText}.`;
      if (data && typeof data.error === 'string') message = data.error;
      else if (data && typeof data.detail === 'string') message = data.detail;
      if (response.status >= 500 && !(data && data.error)) {
        message = `The console failed on this request (${response.status}). Its log says why.`;
      }
      throw new ApiError(response.status, message, data);
    }
    return data;
  }

  // The user and agent every per-user request names.
  function scopeParams() {
    return { user: state.user, agent: state.agent };
  }

  // -- messages -----------------------------------------------------------------------------------

  function showError(err) {
    const box = $('alert');
    const message = err instanceof Error ? err.message : String(err);
    const parts = [el('p', { testid: 'alert-text' }, message)];
    if (err instanceof ApiError && err.status === 401) {
      parts[0] = el('p', { testid: 'alert-text' }, 'Your session has ended. ',
        el('a', { href: './' }, 'Log in again'), '.');
    }
    parts.push(el('button', { type: 'button', className: 'quiet small', on: { click: clearError } }, 'Dismiss'));
    box.replaceChildren(...parts);
    clearNotice();
  }

  function clearError() {
    $('alert').replaceChildren();
  }

  let noticeTimer = null;
  function notice(text) {
    clearError();
    $('notice').textContent = text;
    clearTimeout(noticeTimer);
    noticeTimer = setTimeout(clearNotice, 8000);
  }

  function clearNotice() {
    $('notice').textContent = '';
  }

  // A button that waits: disabled while `work` runs, so a double click sends one request.
  async function busy(button, work) {
    if (button) button.disabled = true;
    try {
      return await work();
    } finally {
      if (button) button.disabled = false;
    }
  }

  // -- the address bar keeps user, agent and tab (reload and links keep the place) --------------

  function saveLocation() {
    const params = new URLSearchParams();
    if (state.user !== null) params.set('user', state.user);
    if (state.agent) params.set('agent', state.agent);
    params.set('tab', state.tab);
    history.replaceState(null, '', `#${params.toString()}`);
  }

  function readLocation() {
    const params = new URLSearchParams(location.hash.slice(1));
    return { user: params.get('user'), agent: params.get('agent'), tab: params.get('tab') };
  }

  // -- header: who is logged in, log out ----------------------------------------------------------

  async function startSession() {
    try {
      state.session = await api('GET', 'api/session');
    } catch (err) {
      if (err.status === 401) {
        location.reload(); // the server answers the login page
        return false;
      }
      showError(err);
      return false;
    }
    const role = state.session.role === 'edit' ? 'can edit' : 'read only';
    $('operator').replaceChildren(
      el('span', { className: 'label' }, 'Logged in as '),
      el('strong', { testid: 'operator-name' }, state.session.operator),
      ' ',
      el('span', { className: `badge role-${state.session.role}`, testid: 'operator-role' }, role),
    );
    // Read-only operators do not get edit controls at all (the API would refuse them anyway).
    for (const node of document.querySelectorAll('.edit-only')) {
      if (!canEdit()) node.remove();
    }
    document.body.classList.add(canEdit() ? 'role-edit' : 'role-read');
    return true;
  }

  async function logout() {
    try {
      await api('POST', 'logout');
    } catch (err) {
      showError(err);
      return;
    }
    location.href = './';
  }

  // -- picking a user and an agent ------------------------------------------------------------------

  async function loadUsers() {
    const current = ticket('users');
    let data;
    try {
      data = await api('GET', 'api/users', { q: state.users.q, offset: state.users.offset, limit: state.users.limit });
    } catch (err) {
      if (current()) showError(err);
      return;
    }
    if (!current()) return;
    state.users.total = data.total;
    const list = $('user-list');
    list.replaceChildren(...data.users.map((u) => el('li', {},
      el('button', {
        type: 'button',
        className: 'user',
        testid: 'user-item',
        'data-user': u.user,
        'aria-current': u.user === state.user ? 'true' : null,
        on: { click: () => chooseUser(u.user, u.agents) },
      },
      el('span', { className: 'user-id' }, u.user),
      el('span', { className: 'user-agents' }, plural(u.agents.length, 'agent'), ': ', u.agents.join(', '))),
    )));
    const first = data.total ? data.offset + 1 : 0;
    const last = data.offset + data.users.length;
    $('user-summary').textContent = data.total
      ? `Users ${first}–${last} of ${data.total}${state.users.q ? ` matching “${state.users.q}”` : ''}.`
      : (state.users.q ? `No user id contains “${state.users.q}”.` : 'No memory is stored yet.');
    pager('users', data.offset, data.users.length, data.total);
  }

  function pager(name, offset, shown, total) {
    $(`${name}-prev`).disabled = offset <= 0;
    $(`${name}-next`).disabled = offset + shown >= total;
    $(`${name}-prev`).parentElement.hidden = total <= shown && offset === 0;
  }

  // Choosing a user shows their memory; `agent` is kept when they have it.
  function chooseUser(user, agents, agent) {
    state.user = user;
    state.agents = agents.slice();
    const preferred = agent || state.agent || (state.session && state.session.agent);
    state.agent = agents.includes(preferred) ? preferred : (agents.includes(state.session.agent) ? state.session.agent : agents[0]);
    state.facts.offset = 0;
    state.audit.offset = 0;
    state.facts.category = '';
    $('receipt').hidden = true;
    clearPanels();
    const select = $('agent');
    select.replaceChildren(...agents.map((a) => el('option', { value: a }, agentLabel(a))));
    select.value = state.agent;
    $('agent').closest('.field').hidden = agents.length < 1;
    $('chosen-user').textContent = user;
    $('chosen').hidden = false;
    $('finder').hidden = true;
    $('workspace').hidden = false;
    resetForget();
    showTab(state.tab);
  }

  // What was shown for the previous user (or agent) goes before anything of the next is loaded.
  function clearPanels() {
    for (const id of ['fact-list', 'profile-sections', 'audit-list', 'explain-result']) $(id).replaceChildren();
    for (const id of ['fact-summary', 'profile-counts', 'audit-summary']) $(id).textContent = '';
    $('explain-result').hidden = true;
  }

  // From the address bar: the user is looked up (exact id) to learn their agents.
  async function chooseUserById(user, agent) {
    let data;
    try {
      data = await api('GET', 'api/users', { q: user, limit: 500 });
    } catch (err) {
      showError(err);
      return;
    }
    const found = data.users.find((u) => u.user === user);
    if (found) chooseUser(found.user, found.agents, agent);
    else showError(new Error(`There is no memory for user “${user}”.`));
  }

  function clearUser() {
    state.user = null;
    state.agent = null;
    state.agents = [];
    $('chosen').hidden = true;
    $('finder').hidden = false;
    $('workspace').hidden = true;
    saveLocation();
  }

  // -- tabs -----------------------------------------------------------------------------------------

  const LOADERS = {
    profile: () => loadProfile(),
    facts: () => loadFacts(),
    explain: () => {},
    history: () => loadAudit(),
    forget: () => resetForget(),
  };

  function showTab(name) {
    // The name may come from the address bar: only known tabs, and only those this role has.
    const known = Object.prototype.hasOwnProperty.call(LOADERS, name);
    if (!known || !document.querySelector(`[data-panel="${name}"]`)) name = 'facts';
    state.tab = name;
    for (const tab of document.querySelectorAll('.tab')) {
      const on = tab.dataset.tab === name;
      tab.classList.toggle('current', on);
      if (on) tab.setAttribute('aria-current', 'page');
      else tab.removeAttribute('aria-current');
    }
    for (const panel of document.querySelectorAll('[data-panel]')) panel.hidden = panel.dataset.panel !== name;
    saveLocation();
    LOADERS[name]();
  }

  // -- profile --------------------------------------------------------------------------------------

  async function loadProfile() {
    const current = ticket('profile');
    const box = $('profile-sections');
    let data;
    try {
      data = await api('GET', 'api/memory', scopeParams());
    } catch (err) {
      if (!current()) return;
      box.replaceChildren();
      $('profile-counts').textContent = '';
      showError(err);
      return;
    }
    if (!current()) return;
    const counts = data.counts || {};
    const byStatus = counts.byStatus || {};
    $('profile-counts').textContent =
      `${plural(counts.facts || 0, 'fact')}: ${byStatus.active || 0} active, ` +
      `${byStatus.superseded || 0} superseded, ${byStatus.archived || 0} archived; ` +
      `${counts.manual || 0} added or edited by people. Last updated ${when(data.lastUpdated)}.`;
    const items = [];
    for (const [name, section] of Object.entries(data.profile || {})) {
      const summary = section && section.summary;
      items.push(el('div', { className: 'section', testid: `profile-${name}` },
        el('dt', {}, SECTION_LABELS[name] || name),
        el('dd', {},
          summary ? el('p', { className: 'summary' }, summary) : el('p', { className: 'empty' }, 'Nothing yet.'),
          section && section.updatedAt ? el('p', { className: 'hint' }, `Updated ${when(section.updatedAt)}`) : null)));
    }
    box.replaceChildren(...items);
  }

  // -- facts ----------------------------------------------------------------------------------------

  function fillSelect(select, options, value) {
    select.replaceChildren(...options.map(([v, label]) => el('option', { value: v }, label)));
    select.value = options.some(([v]) => v === value) ? value : options[0][0];
  }

  async function loadFacts() {
    const current = ticket('facts');
    const f = state.facts;
    let data;
    try {
      data = await api('GET', 'api/facts', {
        ...scopeParams(), status: f.status, category: f.category, q: f.q, sort: f.sort, offset: f.offset, limit: f.limit,
      });
    } catch (err) {
      if (!current()) return;
      $('fact-list').replaceChildren();
      $('fact-summary').textContent = '';
      showError(err);
      return;
    }
    if (!current()) return;
    f.total = data.total;
    fillSelect($('fact-status'), (data.statuses || ['all']).map((s) => [s, STATUS_LABELS[s] || s]), f.status);
    fillSelect($('fact-category'), [['', 'All categories'], ...(data.categories || []).map((c) => [c, c])], f.category);
    $('fact-list').replaceChildren(...data.facts.map(factCard));
    const first = data.total ? data.offset + 1 : 0;
    const last = data.offset + data.facts.length;
    const filtered = f.q || f.category || f.status !== 'all';
    $('fact-summary').textContent = data.total
      ? `Facts ${first}–${last} of ${data.total}${filtered ? ' matching the filters' : ''}.`
      : (filtered ? 'No fact matches the filters.' : 'This memory holds no facts yet.');
    pager('facts', data.offset, data.facts.length, data.total);
  }

  function factCard(fact) {
    const li = el('li', { className: 'card fact', testid: 'fact', 'data-fact-id': fact.id });
    renderFact(li, fact);
    return li;
  }

  function detail(label, value, testid) {
    return el('div', { className: 'detail' }, el('dt', {}, label), el('dd', { testid }, value));
  }

  // The read view of one fact (also what a cancelled edit returns to).
  function renderFact(li, fact, extra) {
    li.classList.toggle('inactive', fact.status !== 'active');
    const badges = el('p', { className: 'badges' },
      el('span', { className: 'badge', testid: 'fact-category' }, fact.category),
      el('span', { className: `badge status-${fact.status}`, testid: 'fact-status' }, fact.status),
      fact.manual ? el('span', { className: 'badge manual', testid: 'fact-manual' }, 'set by a person') : null,
      fact.sourceKind ? el('span', { className: 'badge quiet-badge' }, fact.sourceKind === 'stated' ? 'the user said it' : 'inferred') : null);
    const details = el('dl', { className: 'details' },
      detail('Confidence', percent(fact.confidence), 'fact-confidence'),
      detail('Score today', percent(fact.score), 'fact-score'),
      detail('Confirmed', plural(fact.confirmations || 0, 'time'), 'fact-confirmations'),
      detail('Injected', plural(fact.injections || 0, 'time'), 'fact-injections'),
      detail('Added', when(fact.createdAt), 'fact-created'),
      detail('Changed', when(fact.updatedAt), 'fact-updated'),
      fact.lastInjectedAt ? detail('Last injected', when(fact.lastInjectedAt)) : null,
      fact.eventAt ? detail('Event date', when(fact.eventAt)) : null,
      fact.validUntil ? detail('Valid until', when(fact.validUntil)) : null,
      fact.supersededBy ? detail('Replaced by', fact.supersededBy) : null,
      detail('Id', fact.id, 'fact-id'));
    const actions = canEdit()
      ? el('div', { className: 'actions' },
        el('button', { type: 'button', className: 'quiet', testid: 'fact-edit', on: { click: () => openEdit(li, fact) } }, 'Edit'),
        el('button', { type: 'button', className: 'quiet danger-text', testid: 'fact-delete', on: { click: (e) => deleteFact(li, fact, e.currentTarget) } }, 'Delete'))
      : null;
    setChildren(li, el('p', { className: 'content', testid: 'fact-content' }, fact.content), badges, details, actions, extra);
  }

  function categoryOptions(current) {
    const names = FACT_CATEGORIES.includes(current) || !current ? FACT_CATEGORIES : [current, ...FACT_CATEGORIES];
    return names.map((c) => [c, c]);
  }

  // Enter saves a one-sentence fact (Shift+Enter for a new line); Escape cancels.
  function textareaKeys(form, onEscape) {
    return (event) => {
      if (event.key === 'Enter' && !event.shiftKey && !event.isComposing && event.target.tagName === 'TEXTAREA') {
        event.preventDefault();
        form.requestSubmit();
      } else if (event.key === 'Escape' && onEscape) {
        event.preventDefault();
        onEscape();
      }
    };
  }

  // The edit form, in place of the fact. `fact` is the version the change is based on.
  function openEdit(li, fact) {
    const ids = { content: uid('content'), category: uid('category'), confidence: uid('confidence') };
    const content = el('textarea', { id: ids.content, rows: 3, required: true, testid: 'edit-content', maxlength: 1600 });
    content.value = fact.content;
    const category = el('select', { id: ids.category, testid: 'edit-category' });
    fillSelect(category, categoryOptions(fact.category), fact.category);
    const confidence = el('input', { id: ids.confidence, type: 'number', min: 0, max: 100, step: 1, testid: 'edit-confidence' });
    confidence.value = String(Math.round(fact.confidence * 100));
    const save = el('button', { type: 'submit', testid: 'edit-save' }, 'Save');
    const cancel = () => {
      renderFact(li, fact);
      li.querySelector('[data-testid="fact-edit"]').focus();
    };
    const form = el('form', { className: 'edit', testid: 'fact-edit-form' },
      el('div', { className: 'field' }, el('label', { htmlFor: ids.content }, 'Fact'), content),
      el('div', { className: 'inline-fields' },
        el('div', { className: 'field' }, el('label', { htmlFor: ids.category }, 'Category'), category),
        el('div', { className: 'field' }, el('label', { htmlFor: ids.confidence }, 'Confidence (%)'), confidence)),
      el('div', { className: 'actions' },
        save,
        el('button', { type: 'button', className: 'quiet', testid: 'edit-cancel', on: { click: cancel } }, 'Cancel')));
    form.addEventListener('keydown', textareaKeys(form, cancel));
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      busy(save, () => saveEdit(li, fact, {
        content: content.value.trim(), category: category.value, confidence: confidence.value,
      }));
    });
    li.replaceChildren(form);
    content.focus();
  }

  async function saveEdit(li, fact, values) {
    // Only what the person changed is sent: an unchanged field never overwrites anything.
    const body = { ...scopeParams(), version: fact.version };
    if (values.content && values.content !== fact.content) body.content = values.content;
    if (values.category && values.category !== fact.category) body.category = values.category;
    if (values.confidence !== '') {
      const number = Number(values.confidence);
      if (!Number.isFinite(number) || number < 0 || number > 100) {
        showError(new Error('Confidence is a number from 0 to 100.'));
        return;
      }
      if (Math.round(number) !== Math.round(fact.confidence * 100)) body.confidence = number / 100;
    }
    if (!values.content) {
      showError(new Error('A fact cannot be empty. Delete it instead.'));
      return;
    }
    if (Object.keys(body).length === 3) {
      renderFact(li, fact);
      notice('Nothing was changed.');
      return;
    }
    let answer;
    try {
      answer = await api('PATCH', `api/facts/${encodeURIComponent(fact.id)}`, null, body);
    } catch (err) {
      if (err.status === 409 && err.data && err.data.current) {
        clearError();
        renderFact(li, err.data.current, conflictBox(li, err.data.current, values, 'edit'));
        li.querySelector('[data-testid="conflict"]').focus();
        return;
      }
      showError(err);
      if (err.status === 404) loadFacts();
      return;
    }
    renderFact(li, answer.fact);
    notice('The fact was saved.');
    li.querySelector('[data-testid="fact-edit"]').focus();
  }

  // A 409: someone (an agent's update or another person) changed the fact after this page
  // loaded it. Nothing was written; the person sees the current fact and decides again.
  function conflictBox(li, current, mine, action) {
    const what = action === 'edit' ? 'Your change was not saved' : 'The fact was not deleted';
    return el('div', { className: 'conflict', role: 'alert', tabindex: '-1', testid: 'conflict' },
      el('h3', {}, `${what}: the fact changed meanwhile`),
      el('p', { testid: 'conflict-explanation' },
        'This fact was changed by an agent or another person since you loaded it. ',
        'Nothing was overwritten. Current text: ',
        el('q', { testid: 'conflict-current' }, current.content)),
      el('p', { className: 'hint' },
        `Now: ${current.category}, confidence ${percent(current.confidence)}, status ${current.status}, changed ${when(current.updatedAt)}.`),
      mine && mine.content ? el('p', {}, 'Your text (not saved): ', el('q', { testid: 'conflict-yours' }, mine.content)) : null,
      el('div', { className: 'actions' },
        el('button', {
          type: 'button',
          testid: 'conflict-reload',
          on: { click: () => (action === 'edit' ? openEdit(li, current) : renderFact(li, current)) },
        }, action === 'edit' ? 'Edit the current version' : 'Keep the current version'),
        el('button', { type: 'button', className: 'quiet', testid: 'conflict-refresh', on: { click: () => loadFacts() } }, 'Reload all facts')));
  }

  function confirmDialog(title, text, okLabel) {
    const dialog = $('confirm');
    $('confirm-title').textContent = title;
    $('confirm-text').textContent = text;
    $('confirm-ok').textContent = okLabel;
    dialog.returnValue = '';
    return new Promise((resolve) => {
      dialog.addEventListener('close', () => resolve(dialog.returnValue === 'ok'), { once: true });
      dialog.showModal(); // Escape closes it (returnValue stays ''); focus starts on Cancel
      $('confirm-cancel').focus();
    });
  }

  async function deleteFact(li, fact, button) {
    if (!(await confirmDialog('Delete this fact?', fact.content, 'Delete fact'))) {
      if (button.isConnected) button.focus();
      return;
    }
    try {
      await api('DELETE', `api/facts/${encodeURIComponent(fact.id)}`, { ...scopeParams(), version: fact.version });
    } catch (err) {
      if (err.status === 409 && err.data && err.data.current) {
        clearError();
        renderFact(li, err.data.current, conflictBox(li, err.data.current, null, 'delete'));
        li.querySelector('[data-testid="conflict"]').focus();
        return;
      }
      showError(err);
      if (err.status === 404) loadFacts();
      return;
    }
    notice('The fact was deleted.');
    await loadFacts();
    $('fact-summary').focus();
  }

  function openAdd(open) {
    const form = $('add-fact');
    form.hidden = !open;
    $('add-open').setAttribute('aria-expanded', String(open));
    if (open) {
      fillSelect($('add-category'), categoryOptions('context'), $('add-category').value || 'context');
      $('add-content').focus();
    } else {
      $('add-open').focus();
    }
  }

  async function addFact(event) {
    event.preventDefault();
    const content = $('add-content').value.trim();
    if (!content) {
      showError(new Error('Write the fact first.'));
      return;
    }
    const body = { ...scopeParams(), content, category: $('add-category').value };
    const confidence = $('add-confidence').value;
    if (confidence !== '') {
      const number = Number(confidence);
      if (!Number.isFinite(number) || number < 0 || number > 100) {
        showError(new Error('Confidence is a number from 0 to 100.'));
        return;
      }
      body.confidence = number / 100;
    }
    await busy($('add-fact').querySelector('[type="submit"]'), async () => {
      try {
        await api('POST', 'api/facts', null, body);
      } catch (err) {
        showError(err);
        return;
      }
      $('add-content').value = '';
      openAdd(false);
      notice('The fact was added.');
      // Show the new fact: newest first, no filter hiding it.
      Object.assign(state.facts, { q: '', status: 'all', category: '', sort: 'updated', offset: 0 });
      $('fact-q').value = '';
      $('fact-sort').value = 'updated';
      await loadFacts();
    });
  }

  // -- why injected? --------------------------------------------------------------------------------

  async function runExplain(event) {
    event.preventDefault();
    const message = $('explain-message').value.trim();
    if (!message) return;
    const box = $('explain-result');
    const current = ticket('explain');
    await busy(event.submitter || null, async () => {
      let data;
      try {
        data = await api('POST', 'api/explain', null, { ...scopeParams(), message });
      } catch (err) {
        if (current()) showError(err);
        return;
      }
      if (!current()) return;
      renderExplain(box, data);
    });
  }

  function explainRow(row) {
    const numbers = [];
    if (typeof row.score === 'number') numbers.push(`score ${decimal(row.score)}`);
    if (typeof row.relevance === 'number') numbers.push(`relevance ${decimal(row.relevance)}`);
    if (typeof row.tokens === 'number') numbers.push(plural(row.tokens, 'token'));
    if (row.status && row.status !== 'active') numbers.push(`status ${row.status}`);
    const routes = row.routes && typeof row.routes === 'object' ? Object.keys(row.routes) : [];
    if (row.rule) numbers.push(`recalled by rule ${row.rule}`);
    if (routes.length && !row.guaranteed) numbers.push(`found by ${routes.join(', ')}`);
    return el('li', { className: `card explain-row ${row.inBlock ? 'in' : 'out'}`, testid: 'explain-row', 'data-fact-id': row.id },
      el('p', { className: 'content' }, row.content),
      el('p', { className: 'badges' },
        row.inBlock ? el('span', { className: 'badge status-active' }, 'injected') : el('span', { className: 'badge status-archived' }, 'not injected'),
        row.guaranteed ? el('span', { className: 'badge' }, 'always included') : null,
        numbers.length ? el('span', { className: 'hint' }, numbers.join(' · ')) : null),
      row.reason ? el('p', { className: 'reason', testid: 'explain-reason' }, 'Why: ', row.reason) : null);
  }

  function renderExplain(box, data) {
    const rows = Array.isArray(data.facts) ? data.facts : [];
    const others = Array.isArray(data.others) ? data.others : [];
    const used = rows.filter((r) => r.inBlock);
    const unused = rows.filter((r) => !r.inBlock);
    const size = typeof data.blockTokens === 'number'
      ? ` (about ${plural(data.blockTokens, 'token')}${typeof data.maxInjectionTokens === 'number' ? ` of the ${data.maxInjectionTokens} allowed` : ''})`
      : '';
    const parts = [
      el('p', { testid: 'explain-summary' }, `${plural(used.length, 'fact')} would be injected${size}.`),
    ];
    if (data.injectionEnabled === false) {
      parts.push(el('p', { className: 'conflict' }, 'Injection is turned off in the configuration: the agent is given nothing today. This is what it would be given if it were on.'));
    }
    if (data.formula) {
      // "score = …; relevance = …": one line each reads better than one long sentence. The
      // relevance part also comes alone, so the split never cuts inside a parenthesis.
      let lines = [typeof data.formula === 'string' ? data.formula : JSON.stringify(data.formula)];
      const relevance = typeof data.relevance === 'string' ? data.relevance : '';
      if (relevance && lines[0].endsWith(`; ${relevance}`)) {
        lines = [lines[0].slice(0, -(relevance.length + 2)), relevance];
      }
      parts.push(el('div', { className: 'hint', testid: 'explain-formula' },
        el('p', {}, 'How facts are ranked:'),
        el('ul', { className: 'lines' }, lines.map((line) => el('li', {}, line)),
          data.timeRoute ? el('li', {}, `time: ${data.timeRoute}`) : null)));
    }
    parts.push(el('h3', {}, 'Injected'),
      used.length ? el('ul', { className: 'cards', testid: 'explain-injected' }, used.map(explainRow)) : el('p', { className: 'empty' }, 'None.'));
    if (unused.length || others.length) {
      parts.push(el('h3', {}, 'Not injected'),
        el('ul', { className: 'cards', testid: 'explain-others' }, unused.map(explainRow), others.map(explainRow)));
    }
    parts.push(el('details', { className: 'block', open: '' },
      el('summary', {}, 'The exact text the agent would be given'),
      data.block ? el('pre', { testid: 'explain-block' }, String(data.block)) : el('p', { className: 'empty', testid: 'explain-block' }, 'Nothing: no block would be injected.')));
    box.replaceChildren(...parts);
    box.hidden = false;
  }

  // -- history --------------------------------------------------------------------------------------

  async function loadAudit() {
    const current = ticket('audit');
    let data;
    try {
      data = await api('GET', 'api/audit', { user: state.user, offset: state.audit.offset, limit: state.audit.limit });
    } catch (err) {
      if (current()) showError(err);
      return;
    }
    if (!current()) return;
    state.audit.total = data.total;
    $('audit-list').replaceChildren(...data.entries.map(auditEntry));
    $('audit-summary').textContent = data.total
      ? `Changes ${data.offset + 1}–${data.offset + data.entries.length} of ${data.total}.`
      : 'Nobody has changed this memory through the console yet.';
    pager('audit', data.offset, data.entries.length, data.total);
  }

  function shown(field, value) {
    if (value === undefined || value === null || value === '') return '—';
    return field === 'confidence' && typeof value === 'number' ? percent(value) : String(value);
  }

  function changeRows(entry) {
    const before = entry.before || {};
    const after = entry.after || {};
    const rows = [];
    for (const field of Object.keys(FIELD_LABELS)) {
      const old = before[field];
      const now = after[field];
      if (entry.action === 'fact.edit' && old === now) continue;
      if (old === undefined && now === undefined) continue;
      if (entry.action === 'fact.add' && field !== 'content' && field !== 'category' && field !== 'confidence') continue;
      const value = entry.action === 'fact.edit'
        ? [el('span', { className: 'before', testid: 'audit-before' }, shown(field, old)), ' → ',
          el('span', { className: 'after', testid: 'audit-after' }, shown(field, now))]
        : [el('span', { testid: entry.action === 'fact.delete' ? 'audit-before' : 'audit-after' }, shown(field, entry.action === 'fact.delete' ? old : now))];
      rows.push(el('div', { className: 'detail' }, el('dt', {}, FIELD_LABELS[field]), el('dd', {}, value)));
    }
    return rows;
  }

  function auditEntry(entry) {
    const rows = changeRows(entry);
    return el('li', { className: 'card audit', testid: 'audit-entry', 'data-action': entry.action },
      el('p', { className: 'audit-head' },
        el('strong', { testid: 'audit-operator' }, entry.operator),
        entry.role ? ` (${entry.role})` : '', ' ',
        el('span', { testid: 'audit-action' }, ACTION_LABELS[entry.action] || entry.action),
        entry.agent ? ` · agent ${entry.agent}` : ' · every agent'),
      el('p', { className: 'hint' }, el('time', { testid: 'audit-at' }, when(entry.at)),
        entry.factId ? ` · fact ${entry.factId}` : ''),
      rows.length ? el('dl', { className: 'details wide' }, rows) : null,
      entry.detail ? el('p', { className: 'audit-detail' }, entry.detail) : null,
      entry.redacted ? el('p', { className: 'hint' }, 'The texts were removed when the user was forgotten.') : null);
  }

  // -- forget ---------------------------------------------------------------------------------------

  function resetForget() {
    if (!canEdit()) return;
    $('forget-confirm').value = '';
    $('forget-run').disabled = true;
    $('forget-confirm-label').textContent = 'Type the user id to confirm: ';
    $('forget-confirm-label').append(el('strong', { className: 'user-id' }, state.user || ''));
    $('forget-confirm-hint').textContent = 'The button works once the id is typed exactly.';
    $('forget-agent-label').textContent = `Only the memory of agent ${agentLabel(state.agent || '')}`;
  }

  async function forget(event) {
    event.preventDefault();
    const typed = $('forget-confirm').value;
    if (typed !== state.user) return; // the button is disabled too: this is Enter in the box
    const onlyAgent = document.querySelector('input[name="forget-scope"]:checked').value === 'agent';
    const body = { user: state.user, confirm: typed };
    if (onlyAgent) body.agent = state.agent;
    let data;
    try {
      data = await busy($('forget-run'), () => api('POST', 'api/forget', null, body));
    } catch (err) {
      showError(err);
      return;
    } finally {
      $('forget-run').disabled = $('forget-confirm').value !== state.user;
    }
    const who = data.user;
    $('receipt-intro').textContent = data.agent
      ? `The memory agent ${data.agent} held about ${who} was erased. What was deleted:`
      : `Everything the memory held about ${who} was erased. What was deleted:`;
    $('receipt-lines').replaceChildren(...(data.receipt || []).map((line) => el('li', { testid: 'receipt-line' }, line)));
    notice(`${who} was forgotten.`);
    const remaining = onlyAgent ? state.agents.filter((a) => a !== data.agent) : [];
    if (remaining.length) {
      chooseUser(who, remaining);
    } else {
      clearUser();
    }
    $('receipt').hidden = false;
    state.users.offset = 0;
    await loadUsers();
    $('receipt-title').focus();
  }

  // -- wiring ---------------------------------------------------------------------------------------

  function wire() {
    $('logout').addEventListener('click', logout);

    $('user-search').addEventListener('submit', (event) => {
      event.preventDefault();
      state.users.q = $('user-q').value.trim();
      state.users.offset = 0;
      loadUsers();
    });
    $('users-prev').addEventListener('click', () => { state.users.offset = Math.max(0, state.users.offset - state.users.limit); loadUsers(); });
    $('users-next').addEventListener('click', () => { state.users.offset += state.users.limit; loadUsers(); });
    $('change-user').addEventListener('click', () => {
      $('finder').hidden = false;
      $('user-q').focus();
    });
    $('agent').addEventListener('change', () => {
      state.agent = $('agent').value;
      clearPanels();
      state.facts.offset = 0;
      state.facts.category = '';
      resetForget();
      showTab(state.tab);
    });

    for (const tab of document.querySelectorAll('.tab')) {
      tab.addEventListener('click', () => showTab(tab.dataset.tab));
    }

    // Facts: selects apply at once; the text applies on Enter (or the Search button).
    $('fact-filters').addEventListener('submit', (event) => {
      event.preventDefault();
      state.facts.q = $('fact-q').value.trim();
      state.facts.offset = 0;
      loadFacts();
    });
    for (const [id, key] of [['fact-status', 'status'], ['fact-category', 'category'], ['fact-sort', 'sort']]) {
      $(id).addEventListener('change', () => {
        state.facts[key] = $(id).value;
        state.facts.q = $('fact-q').value.trim();
        state.facts.offset = 0;
        loadFacts();
      });
    }
    $('facts-prev').addEventListener('click', () => { state.facts.offset = Math.max(0, state.facts.offset - state.facts.limit); loadFacts(); });
    $('facts-next').addEventListener('click', () => { state.facts.offset += state.facts.limit; loadFacts(); });
    $('fact-summary').setAttribute('tabindex', '-1');

    if (canEdit()) {
      $('add-open').addEventListener('click', () => openAdd($('add-fact').hidden));
      $('add-cancel').addEventListener('click', () => openAdd(false));
      $('add-fact').addEventListener('submit', addFact);
      $('add-fact').addEventListener('keydown', textareaKeys($('add-fact'), () => openAdd(false)));
      $('forget-confirm').addEventListener('input', () => {
        $('forget-run').disabled = $('forget-confirm').value !== state.user;
      });
      $('forget-form').addEventListener('submit', forget);
    }

    $('explain-form').addEventListener('submit', runExplain);
    $('explain-form').addEventListener('keydown', textareaKeys($('explain-form'), null));

    $('audit-prev').addEventListener('click', () => { state.audit.offset = Math.max(0, state.audit.offset - state.audit.limit); loadAudit(); });
    $('audit-next').addEventListener('click', () => { state.audit.offset += state.audit.limit; loadAudit(); });

    $('confirm-ok').addEventListener('click', () => $('confirm').close('ok'));
    $('confirm-cancel').addEventListener('click', () => $('confirm').close(''));
    $('receipt-title').setAttribute('tabindex', '-1');
  }

  async function main() {
    if (!(await startSession())) return;
    wire();
    const place = readLocation();
    if (place.tab) state.tab = place.tab;
    await loadUsers();
    if (place.user !== null) await chooseUserById(place.user, place.agent);
    document.body.classList.add('ready');
  }

  document.addEventListener('DOMContentLoaded', main);
})();
