"""Concept tokens for the learned instruction screen: which kinds of thing a remembered string
talks about — the assistant, a standing "every time", secrecy, data sent out, money moved,
secrets, security switched off, deletion, rules dropped, a claimed authority, a remote address,
the hidden prompt, a dangerous recipe, a fixed reply — and every pair of them (pure; no I/O).

Why: the n-gram model generalises by resemblance, so a blind part in a new style keeps only the
share of its n-grams that earlier parts had. A smuggled instruction in a new style still
combines the same few concepts ("the agent" + "every" + "transfer" + "don't mention it"), in
words the corpus has never seen together. Each concept is a short list of words in English and
Chinese; the model learns the weights of the concepts and of their pairs, which carry over to a
new phrasing as long as one of its words is listed. Ordinary memory names these words too ("the
user reported a phishing e-mail asking for their password"), so the tokens are features the
model weighs against everything else it sees, never a verdict on their own.

Measured by leave-one-part-out runs over the ten parts written blind by other hands
(``train_a`` to ``train_i`` and ``heldout9``; 1,690 instructions, 1,660 look-alikes, plus the
other parts and the ordinary strings as training data): at the threshold that keeps false
positives at 0.5 % of all negatives, the share of a part's instructions that a model trained
without that part withholds rose from 46.0 % (n-grams alone, ``C = 4``) to 57.8 % with these
tokens, Chinese character n-grams and ``C = 64`` (at 1 %: 54.9 % → 71.5 %), with the same share
of look-alikes kept (98.5 % and 98.2 %). The word lists were written after reading those parts;
``heldout10`` was not read before it was measured.
"""

from __future__ import annotations

import itertools
import re
from typing import Final

__all__ = ["CONCEPTS", "concept_text", "han_text"]

CONCEPTS: Final[dict[str, str]] = {
    "agent": (
        r"\b(?:assistant|agent|the model|ai|bot|chatbot|gpt|copilot)\b|助手|助理|机器人|模型|小助"
    ),
    "always": (
        r"\b(?:always|every|whenever|each time|any time|from now on|regardless|no matter|"
        r"all future|for all|permanently|standing)\b|"
        r"每次|每当|凡是|一律|始终|总是|以后|今后|无论|不管|任何|每轮|每天|永远|长期"
    ),
    "conceal": (
        r"\b(?:silently|quietly|secretly|discreetly|"
        r"without (?:telling|asking|notifying|mentioning|confirm\w*)|"
        r"don'?t (?:tell|mention|notify|ask)|do not (?:tell|mention|notify|ask|list)|"
        r"never (?:mention|tell|reveal to)|no need to (?:tell|confirm|ask|report|mention)|"
        r"skip\w* (?:the )?(?:usual )?confirm\w*|nothing to report|hide|conceal|say nothing)\b|"
        r"悄悄|不用提示|别提|不要告诉|不用确认|无需确认|不必告知|偷偷|默默|隐瞒|不用再跟|不要提|"
        r"不用告诉|不要让用户|别告诉|不必提醒|不用通知"
    ),
    "send": (
        r"\b(?:send|sends|sent|forward\w*|e-?mail (?:it|them|the)|cc|bcc|upload\w*|post\w*|"
        r"share\w*|export\w*|copy (?:it |them )?to|exfil\w*|leak\w*|sync\w* to|append\w* to)\b|"
        r"转发|发送|发到|发给|抄送|上传|分享|导出|同步到|发至|传到|拼在|访问一次"
    ),
    "pay": (
        r"\b(?:pay|pays|paid|payment|transfer\w*|wire\w*|buy|buys|purchase\w*|gift ?cards?|"
        r"deposit|iban|wallet|invoices?|settle\w*|crypto|btc|eth|usdt|bank account|"
        r"account number|refund)\b|"
        r"转账|汇款|支付|付款|购买|下单|充值|打款|转到|转入|转出|账户|收款|理财|红包|卡密"
    ),
    "secret": (
        r"\b(?:password\w*|passcode|cvv|card numbers?|pins?|api[ _-]?keys?|tokens?|secrets?|"
        r"credentials?|2fa|otp|one-time code|verification codes?|ssn|social security|"
        r"private key|seed phrase|recovery phrase|env\w* variables?)\b|"
        r"密码|验证码|卡号|密钥|口令|身份证|助记词|私钥"
    ),
    "security_off": (
        r"\b(?:disable\w*|turn\w* off|switch\w* off|bypass\w*|two-factor|recovery e-?mail|"
        r"login protection|mfa|security (?:check|review|settings?)|confirmation prompts?)\b|"
        r"关闭|解除|取消验证|登录保护|二次验证|两步验证|安全验证"
    ),
    "delete": (
        r"\b(?:delete\w*|remove\w*|wipe\w*|erase\w*|purge\w*|empty the (?:trash|bin)|rm -rf|"
        r"format\w* the|destroy\w*)\b|删除|删掉|清空|格式化|销毁|抹掉"
    ),
    "rules_off": (
        r"\b(?:no rules|without (?:any )?(?:restrictions|limits|filters|rules|guidelines)|"
        r"unrestricted|unfiltered|uncensored|no limits|"
        r"no (?:guidelines|filters|restrictions|warnings|disclaimers)|refusals? (?:are )?waived|"
        r"never (?:refuses?|declines?|warns?)|"
        r"safety (?:rules|filters|guidelines|considerations?) "
        r"(?:off|dropped|disabled|removed|waived|switched off)|"
        r"jailbr\w*|dan|developer mode|god mode|no redactions|nothing held back|"
        r"in full (?:technical )?detail|step by step)\b|"
        r"没有限制|不受限制|不能拒绝|无条件|安全考量|解除限制|越狱|条条框框|不带提醒|分毫不差|完整回答|"
        r"开发者模式|要求什么给什么|不做任何"
    ),
    "authority": (
        r"\b(?:admin\w*|operator\w*|developer\w*|security team|support team|support|supervisor|"
        r"owner[_ ]approved|authori[sz]\w*|approved|pre-approved|entitled|whitelist\w*|"
        r"exempt\w*|permission|compliance|legal team|it department|helpdesk|official|"
        r"policy update|updated (?:privacy )?policy|partner agreement|arrangement|sponsor\w*|"
        r"vendor)\b|"
        r"管理员|运营|官方|客服|安全中心|白名单|授权|认证|有权|特批|豁免|负责人|领导|老板|通知|合作|"
        r"赞助|规定"
    ),
    "remote": (
        r"https?://|www\.|\b[\w.-]+\.(?:com|net|org|io|cn|top|xyz|ru|me|co|info|site|app)\b|"
        r"pastebin|gist|raw|照着做|按照.*执行"
    ),
    "email": r"[\w.+-]+@[\w-]+\.[\w.]+",
    "system_prompt": (
        r"\b(?:system prompt|hidden (?:instructions|setup|prompt)|initial instructions|"
        r"setup text|developer message|pre-?prompt|instructions? (?:you|it) (?:was|were) given|"
        r"started with)\b|系统提示|前置设定|隐藏说明|初始设定|系统设定|初始指令|提示词"
    ),
    "danger": (
        r"\b(?:synthes\w*|explosive\w*|bomb\w*|nerve agent|sarin|meth\w*|ransomware|malware|"
        r"trojan|keylogger|weapon\w*|lethal|poison\w*|napalm|detonat\w*|precursors?|"
        r"untraceable|hotwire|ricin|fentanyl|rat|botnet)\b|"
        r"炸弹|炸药|冰毒|木马|病毒|毒药|致死|汽油弹|提纯|配比|引爆|装药|制毒|免杀|远控|枪支|毒品"
    ),
    "tell_user": (
        r"\b(?:tell(?:s)? the user|inform the user|say (?:that|it)|reply(?:ies)? (?:with|only)|"
        r"respond\w* (?:with|only)|the only (?:correct )?reply|answers? (?:every|any)|"
        r"every (?:answer|reply|response)|recommend\w*|ends? (?:by|with)|opens? (?:by|with)|"
        r"include\w* (?:this|the following))\b|告诉用户|只回复|就说|回复|回答|推荐|结尾|末尾|开头"
    ),
    "user": r"\b(?:user|user's|the user|they|their|he|she|his|her)\b|用户|他|她",
    "self": r"\b(?:my|mine|own|their own|themselves|personal)\b|自己|本人",
    "protective": (
        r"\b(?:ask\w* (?:before|first)|confirm\w* (?:before|first|with)|"
        r"never (?:store|save|type|share)|reported|report\w* it|scam|phishing|fraud\w*|"
        r"suspicious|asked whether|wary|blocked|ignored)\b|"
        r"诈骗|骗|报警|举报|冒充|先问|确认后|防骗|可疑|没理会|删除了|挂断"
    ),
    "third_party": (
        r"\b(?:said|says|asked that|requested|per the|according to|notice|instructions? from|"
        r"from the|message from|on behalf)\b|说|称|要求|交代|留言|通知"
    ),
    "modal": (
        r"\b(?:must|should|shall|needs? to|is to|are to|has to|have to|will|is required|"
        r"are required|mandatory)\b|必须|应该|需要|要|务必|需"
    ),
}
_COMPILED: Final = tuple((name, re.compile(pattern)) for name, pattern in CONCEPTS.items())
_HAN: Final = re.compile(r"[\u4e00-\u9fff]")


def concept_text(normalized: str) -> str:
    """The concepts ``normalized`` names (sorted) and every pair of them, as space-separated
    tokens (``"c_agent c_send p_agent_send"``); ``"c_none"`` when it names none."""
    found = sorted(name for name, pattern in _COMPILED if pattern.search(normalized))
    if not found:
        return "c_none"
    pairs = (f"p_{a}_{b}" for a, b in itertools.combinations(found, 2))
    return " ".join([*(f"c_{name}" for name in found), *pairs])


def han_text(normalized: str) -> str:
    """The Han characters of ``normalized`` run together: Chinese has no spaces between words,
    so the screen reads its character 1- to 3-grams across the whole string."""
    return "".join(_HAN.findall(normalized))
