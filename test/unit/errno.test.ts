import test from 'ava';
import { IpvsRequestError } from '../../src/kernel/ipvs/client.ts';
import { CommandError } from '../../src/kernel/exec.ts';
import { errnoName, isErrno, isExists, isNoSuchService, isNotFound, isPermission, netlinkErrorCode } from '../../src/kernel/netlink/errno.ts';

/** errno → [isNotFound, isNoSuchService, isExists, isPermission]. */
const TABLE: readonly [string, boolean, boolean, boolean, boolean][] = [
  ['ENOENT', true, false, false, false],
  ['ESRCH', true, true, false, false],
  ['EEXIST', false, false, true, false],
  ['EPERM', false, false, false, true],
  ['EACCES', false, false, false, false],
  ['ENODEV', false, false, false, false],
  ['EADDRNOTAVAIL', false, false, false, false],
  ['EINVAL', false, false, false, false],
  ['ENOMEM', false, false, false, false],
  ['EBUSY', false, false, false, false],
  ['E?523', false, false, false, false],
];

/** The three ways an errno reaches drover: the netlink package's rejection, IpvsRequestError, a Node system-call error. */
function carriers(code: string): readonly [string, unknown][] {
  const packageMessage = code.startsWith('E?') ? `Request rejected: -${code.slice(2)}` : `Request rejected: ${code}`;
  return [
    ['netlink package', new Error(packageMessage)],
    ['IpvsRequestError', new IpvsRequestError('DEL_DEST', code, undefined)],
    ['Node errno', Object.assign(new Error(`${code}: open '/x'`), { code })],
  ];
}

test('the predicates answer exactly the errno table, whichever way the errno came', (t) => {
  for (const [code, notFound, noSuchService, exists, permission] of TABLE) {
    for (const [via, err] of carriers(code)) {
      const what = `${code} via ${via}`;
      t.is(errnoName(err), code, what);
      t.is(isNotFound(err), notFound, `isNotFound ${what}`);
      t.is(isNoSuchService(err), noSuchService, `isNoSuchService ${what}`);
      t.is(isExists(err), exists, `isExists ${what}`);
      t.is(isPermission(err), permission, `isPermission ${what}`);
    }
  }
});

test('isErrno matches any of the names given, and only those', (t) => {
  const err = new Error('Request rejected: EADDRNOTAVAIL');
  t.true(isErrno(err, 'EADDRNOTAVAIL'));
  t.true(isErrno(err, 'ENODEV', 'EADDRNOTAVAIL'));
  t.false(isErrno(err, 'ENODEV'));
  t.false(isErrno(err));
});

test('errors without an errno match no predicate', (t) => {
  const none: unknown[] = [
    new Error('Timeout has been reached'),
    new Error('ENOENT'),
    'Request rejected: ENOENT',
    undefined,
    null,
    42,
    new CommandError('ipset save', 1, 'ENOENT'),
    { code: 'invalid_type' },
    { code: 'Eexist' },
  ];
  for (const err of none) {
    t.is(errnoName(err), undefined, String(err));
    t.false(isNotFound(err) || isNoSuchService(err) || isExists(err) || isPermission(err) || isErrno(err, 'ENOENT'), String(err));
  }
});

test('netlinkErrorCode reads only the netlink package\'s rejections', (t) => {
  t.is(netlinkErrorCode(new Error('Request rejected: ESRCH')), 'ESRCH');
  t.is(netlinkErrorCode(new Error('Request rejected: -523')), 'E?523');
  t.is(netlinkErrorCode(Object.assign(new Error('x'), { code: 'ENOENT' })), undefined);
  t.is(netlinkErrorCode(new IpvsRequestError('GET_SERVICE', 'ESRCH', 3)), undefined);
});
