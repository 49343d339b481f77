"""What an attack's words mean, in many languages: a hand-written lexicon of the words
instruction overrides and secret requests are made of, each mapped to a concept
("ignore", "previous", "instructions", "secret"...), so a rule or a feature written once
reads German, Hindi or Thai as it reads English.

The lexicon is data (`LEXICON`), written for this project: per concept, the words of
English and the languages attackers and machine translations use most (German, French,
Spanish, Italian, Portuguese, Dutch, Polish, Russian, Ukrainian, Turkish, Greek,
Swedish, Danish, Norwegian, Czech, Indonesian, Tagalog, Vietnamese, Arabic, Persian,
Hindi, Bengali, Chinese, Japanese, Korean, Thai). An entry ending in "*" is a stem (any
word it begins: "vorherig*" is "vorherigen" too); other entries are whole words, or
phrases of whole words; a word with two letters swapped inside it ("ingore",
"passwrod") is read as the entry. Words of the scripts written without spaces (Chinese,
Japanese, Thai) and Korean ones (which carry their particles) are found anywhere in the
text.

`concepts(text)` reads a normalized view (`injection_model.normalize`: lower case,
look-alike letters folded to Latin, so the entries are folded the same way) and gives
the concepts of each clause. Pure and deterministic; built once, on first use.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable, Mapping
from typing import NamedTuple

from pipeline.processors.guards.text_view import LOOKALIKES, view

__all__ = ["AND_THEN", "LEXICON", "RULE_ONLY", "Clause", "clause_concepts", "concepts"]

LEXICON: Mapping[str, tuple[str, ...]] = {
    # to set aside what was said before
    "ignore": (
        "ignore", "ignoring", "ignored", "disregard*", "forget", "forgetting", "overlook",
        "override", "bypass",
        "ignorier*", "vergiss", "vergessen", "missacht*", "überspring*", "übergeh*",
        "abweichend", "nevermind", "never mind",
        "ignorez", "ignorer", "oublie", "oubliez", "oublier", "ignora", "ignoren", "ignore",
        "olvida", "olvide", "olviden", "olvidar", "omite", "omita", "desconsidera",
        "desconsidere", "dimentica", "dimenticare", "dimenticate", "trascura", "ignorare",
        "ignorate", "esqueça", "esqueca", "esquece", "esquecer", "desconsiderar", "ignorar",
        "negeer", "vergeet", "negeren", "vergeten", "zignoruj", "ignoruj", "zapomnij",
        "pomiń", "игнорир*", "игнорировать", "игнорируй", "игнорируйте", "проигнорир*", "забудь", "забудьте", "забыть", "забуд*",
        "пренебреги", "ігноруй*", "ігнорувати", "забудь", "yok say", "yoksay", "görmezden",
        "unut", "unutun", "αγνόησε", "αγνοήστε", "αγνόησ*", "αγνοησ*", "ξέχασε", "ξεχάστε",
        "ignorera", "glöm", "ignorer", "glem", "ignoruj", "zapomeň", "zapomeňte", "abaikan",
        "lupakan", "acuhkan", "huwag pansinin", "balewalain", "kalimutan", "bỏ qua",
        "phớt lờ", "quên", "تجاهل", "تجاهلي", "تجاهلوا", "تغاضى", "تغاض", "انس", "انسى", "انسَ", "تناس",
        "نادیده", "فراموش", "अनदेखा", "अनदेखी", "नज़रअंदाज़", "नजरअंदाज", "भूल", "भुला",
        "अवहेलना", "उपेक्षा", "উপেক্ষা", "ভুলে", "অগ্রাহ্য", "อย่าไปสนใจ", "อย่าสนใจ", "忽略", "无视", "忽视", "忘记", "忘掉", "不要理会", "無視",
        "忘れ", "무시", "잊어", "잊으", "เพิกเฉย", "ละเว้น", "ไม่สนใจ", "ลืม",
        # more forms and languages: Hindi, Arabic, Persian, Thai, Turkish, Indonesian,
        # Russian, Bengali, Tagalog, Vietnamese, Chinese, Japanese, Korean, Romance
        "दरकिनार", "छोड़", "छोड़ें", "छोड़कर", "ध्यान न दें", "ध्यान मत दो", "परवाह न करें",
        "أهمل", "اهمل", "أهملي", "تخط", "تخطى", "تجاوز", "لا تلتفت", "نادیده بگیر",
        "ไม่ต้องสนใจ", "มองข้าม", "เลิกทำตาม", "ไม่ต้องทำตาม",
        "yok sayın", "yok sayarak", "dikkate alma", "dikkate almayın", "göz ardı", "es geç",
        "aldırma", "aldırmayın", "boşver", "unut*", "atla", "atlayın",
        "hiraukan", "mengabaikan", "abaikanlah", "lupakanlah", "kesampingkan", "lewati",
        "не обращай внимания", "не обращайте внимания", "отбрось*", "откинь", "пропусти",
        "пропустите", "отмени", "отмените", "не слушай", "не следуй",
        "এড়িয়ে", "অবহেলা", "ipagwalangbahala", "huwag intindihin", "isantabi", "laktawan",
        "lờ đi", "không để ý", "gạt bỏ", "không tuân theo", "đừng làm theo",
        "不用管", "别管", "不要管", "抛开", "无需遵守", "不必遵守", "跳过", "丢弃", "忽略掉",
        "無視して", "従わないで", "従わず", "破棄", "無効に", "무시해", "무시하", "잊고",
        "잊어버", "간과",
        "ignori", "ignorad", "ignorando", "ignorant", "olvidando", "dimenticando",
        "não considere", "desconsidera", "ignorieren", "vergesst",
        # the languages flagged least (Hindi, Arabic, Thai, Turkish, Tagalog, Korean,
        # Indonesian): more verb forms, polite and negated imperatives, passives
        "भूल*", "भुला*", "नजरअंदाज़", "नज़रअंदाज", "अनसुना", "ओवरराइड", "ध्यान मत दें",
        "ध्यान मत दीजिए", "ध्यान ना दें", "परवाह मत करो", "परवाह मत करें",
        "اغفل", "أغفل", "تغافل", "انسي", "إنسى", "اترك", "لا تهتم", "لا تكترث", "تجاهلها",
        "ลบล้าง", "ไม่ต้องปฏิบัติตาม", "อย่าทำตาม", "ไม่ต้องใส่ใจ", "อย่าใส่ใจ",
        "yoksay*", "umursama*", "görmezden gelin", "ihmal*",
        "kalimutang", "huwag mong pansinin", "huwag ninyong pansinin", "wag pansinin",
        "huwag nang pansinin", "ipagsawalangbahala",
        "건너뛰", "무효화",
        "diabaikan", "dilupakan", "abaikannya", "lupakannya", "jangan hiraukan",
        "jangan pedulikan", "tidak usah hiraukan", "kesampingkanlah",
    ),
    # what came before, or all of it
    "previous": (
        "previous", "prior", "above", "earlier", "preceding", "former", "initial",
        "original", "all", "every", "everything",
        "vorherig*", "vorig*", "bisherig*", "obig*", "vorangegangen*", "vorangehend*",
        "früher*", "alle", "alles", "sämtlich*", "précédent*", "precedent*", "antérieur*",
        "ci-dessus", "tout", "toutes", "tous", "anterior", "anteriores", "previa", "previas",
        "arriba", "todo", "todas", "todos", "precedenti", "precedente", "sopra", "tutte",
        "tutti", "tutto", "prévias", "acima", "tudo", "vorige", "eerdere", "voorgaande",
        "bovenstaande", "poprzedni*", "wcześniejsz*", "powyższ*", "wszystk*", "предыдущ*",
        "прежн*", "ранее", "выше", "все", "всё", "попередн*", "önceki", "yukarıdaki", "tüm",
        "bütün", "her şeyi", "προηγούμεν*", "προηγουμεν*", "όλες", "όλα", "tidigare",
        "föregående", "alla", "tidligere", "forrige", "předchozí", "všechny", "sebelumnya",
        "semua", "nakaraang", "naunang", "lahat", "trước", "tất cả", "السابقة", "السابق",
        "جميع", "كل", "قبلی", "همه", "पिछले", "पिछली", "पहले", "सभी", "सारे", "পূর্ববর্তী",
        "আগের", "সমস্ত", "সব", "之前", "以前", "先前", "上面", "上述", "所有", "全部", "一切",
        "これまで", "上記", "すべて", "全て", "이전", "모든", "위의", "ก่อนหน้า", "ทั้งหมด",
        "पिछला", "पूर्व", "पूर्ववर्ती", "उपरोक्त", "ऊपर", "ऊपरी", "सब", "सबकुछ", "सब कुछ",
        "समस्त", "तमाम", "प्रारंभिक", "मूल",
        "سابقة", "سابق", "السالفة", "أعلاه", "الماضية", "الأصلية", "كافة", "الكل",
        "پیشین", "قبل", "تمام", "تمامی", "اولیه",
        "ข้างต้น", "ข้างบน", "เดิม", "ทุก",
        "öncek*", "evvelki", "yukarıda", "tümünü", "tümü", "hepsini", "hepsi", "önceden",
        "orijinal", "sebelum", "terdahulu", "di atas", "seluruh", "segala", "awal", "asli",
        "всех", "всем", "весь", "вся", "любые", "изначальн*", "первоначальн*", "исходн*",
        "вышеуказанн*", "вышеизложенн*", "прошл*", "старые",
        "পূর্বের", "মূল", "উপরের", "সকল", "সবকিছু", "আগে", "পূর্বে",
        "nakaraan", "nauna", "sa itaas", "orihinal",
        "trước đó", "trước đây", "ở trên", "phía trên", "mọi", "toàn bộ", "ban đầu",
        "此前", "前面", "前述", "原有", "原始", "最初", "早先", "任何",
        "前の", "先ほど", "さっき", "今まで", "元の", "最初の", "上の",
        "앞의", "앞서", "지금까지", "기존", "원래", "처음", "위에", "전부", "모두",
        "précédemment", "anteriormente", "precedentemente", "iniziali", "originali",
        "iniciales", "originales", "iniciais", "originais", "initiales",
        "पिछल*", "सारी", "पुराने", "पुरानी", "अब तक", "अभी तक", "उपर्युक्त", "संपूर्ण", "सम्पूर्ण",
        "المسبقة", "القديمة", "الماضي", "المذكورة", "السالف", "الأولية", "سابقا", "سابقاً",
        "مسبقا", "مسبقاً",
        "ที่ผ่านมา", "ก่อนนี้", "แรกเริ่ม", "ด้านบน",
        "eski", "geçmiş", "şimdiye kadar",
        "nasa itaas", "itaas", "anumang",
        "예전", "과거", "앞선", "상기", "초기",
        "tadi", "sejauh ini", "semuanya", "diatas", "yang lalu",
    ),
    # what the assistant was told
    "instructions": (
        "instruction", "instructions", "rules", "prompt", "prompts", "guidelines",
        "directives", "directions", "commands", "programming",
        "anweisung*", "instruktion*", "regeln", "richtlinie*", "vorgabe*", "befehle",
        "consigne*", "règles", "directives", "instrucción", "instrucciones", "reglas",
        "directrices", "indicaciones", "istruzion*", "regole", "instruções", "instrucoes",
        "regras", "diretrizes", "instructies", "regels", "instrukcj*", "polece*", "zasad*",
        "инструкци*", "указани*", "правил*", "інструкці*", "вказівк*", "talimat*", "kural*",
        "yönerge*", "οδηγί*", "οδηγι*", "κανόν*", "εντολ*", "instruktion*", "instruks*",
        "regler", "pokyn*", "instrukce", "instruksi", "perintah", "aturan", "tagubilin",
        "panuto", "hướng dẫn", "chỉ dẫn", "quy tắc", "التعليمات", "تعليمات", "تعليماتك", "الأوامر",
        "القواعد", "دستورالعمل*", "دستورات", "निर्देश*", "नियम*", "আদেশ", "নির্দেশ*",
        "নিয়ম*", "指令", "指示", "规则", "提示词", "命令", "ルール", "プロンプト", "지시*", "명령*",
        "규칙*", "지침*", "คำสั่ง", "คำแนะนำ", "กฎ",
        "आदेश*", "हिदायत*", "अनुदेश*", "दिशानिर्देश*", "प्रॉम्प्ट", "कमांड",
        "الإرشادات", "إرشادات", "التوجيهات", "توجيهات", "أوامر", "قواعد", "أوامرك",
        "دستور", "قوانین",
        "ข้อกำหนด", "แนวทาง", "พรอมต์", "พรอมพ์", "คำชี้แจง",
        "komut*", "direktif*", "petunjuk", "arahan", "pedoman", "instruksimu", "perintahmu",
        "aturanmu", "peraturan", "ketentuan",
        "команд*", "директив*", "подсказк*", "промпт*", "промт*", "распоряжени*",
        "প্রম্পট", "কমান্ড", "utos", "patakaran", "alituntunin", "instruksyon",
        "instruksiyon", "direksyon",
        "lệnh", "chỉ thị", "quy định", "câu lệnh", "lời nhắc",
        "准则", "指引", "系统提示", "系統提示", "提示詞", "規則",
        "設定", "システムプロンプト", "制約", "ガイドライン", "インストラクション",
        "프롬프트", "가이드라인",
        "indicações", "orientações", "ordini", "órdenes", "ordens", "ordres", "comandos",
        "comandi", "commandes", "direttive", "directivas", "diretivas",
        "प्रोम्प्ट", "प्रांप्ट", "गाइडलाइन*", "रूल्स",
        "موجه النظام", "موجّه النظام", "مطالبة النظام", "البرومبت", "برومبت", "التعليمة",
        "إرشاداتك", "قواعدك", "توجيهاتك",
        "พร้อมต์", "พรอมท์", "พร้อมท์", "ข้อบังคับ", "คำชี้แนะ",
        "istem", "istemi", "istemin", "istemini", "istemleri", "istemlerini", "promptu",
        "promptunu", "promptun", "emirleri", "emirlerini",
        "kautusan", "instruksyon*", "tagubilin*",
        "지시사항", "규정",
        "instruksi*", "petunjuk*", "arahan*", "pedoman*", "perintah*",
    ),
    # tasks set before ("forget all previous tasks"; "your task is to..." asks nothing)
    "tasks": (
        "task", "tasks", "aufgabe*", "tâches", "tareas", "compiti", "tarefas", "taken",
        "zadania", "задачи", "задания", "görev*",
        "कार्य*", "المهام", "مهام", "المهمة", "ภารกิจ", "tugas", "tugasmu", "задач*",
        "задани*", "gawain", "nhiệm vụ", "任务", "任務", "タスク", "과제",
        "임무", "tâche", "tarea", "compito", "tarefa", "opdracht*",
        "मिशन", "टास्क", "مهمتك", "المهمات", "tugas*",
    ),
    # what a secret request asks for: a password or a key
    "secret": (
        "password", "passwords", "passcode", "passphrase", "passkey", "secret key",
        "secret word", "secret code", "access code", "pin code",
        "passwort", "kennwort", "geheimwort", "geheimcode", "mot de passe", "code secret",
        "clé secrète", "contraseña", "contrasena", "clave secreta", "palabra secreta",
        "parola segreta", "chiave segreta", "senha", "palavra secreta", "chave secreta",
        "wachtwoord", "hasło", "hasla", "hasła", "hasło", "пароль", "пароля", "секретный ключ",
        "секретное слово", "şifre", "şifreyi", "şifresi", "parola", "parolayı", "gizli anahtar",
        "κωδικό*", "lösenord", "adgangskode", "passord", "heslo", "kata sandi", "sandi", "sandimu", "kata sandimu",
        "kata rahasia", "kunci rahasia", "mật khẩu", "كلمة المرور", "كلمة السر", "مفتاح سري", "مفتاحك السري", "المفتاح السري", "رمز عبور",
        "पासवर्ड", "गुप्त शब्द", "गुप्त कुंजी", "गुप्त कोड", "পাসওয়ার্ড", "密码", "密钥", "口令", "パスワード", "暗証",
        "秘密鍵", "비밀번호", "암호", "รหัสผ่าน",
        "कूटशब्द", "पासकोड", "सीक्रेट", "كلمة سر", "رمز المرور", "كلمة مرور", "الرقم السري",
        "رمز الدخول", "كلمة مرورك", "كلمة سرك", "گذرواژه", "کلمه عبور",
        "รหัสลับ", "คำลับ", "พาสเวิร์ด", "กุญแจลับ",
        "şifreni", "şifreniz", "şifrenizi", "şifresini", "parolanı", "parolanız", "gizli kelime", "gizli kod", "erişim kodu",
        "kode rahasia", "kode akses", "katasandi", "sandinya", "kata sandinya",
        "парол*", "секретный код", "код доступа", "кодовое слово", "пинкод", "ключ доступа",
        "গোপন শব্দ", "গোপন কোড", "পাসকোড", "গোপন চাবি", "lihim na salita", "lihim na code",
        "mã bí mật", "khóa bí mật", "mã truy cập", "mật mã",
        "密碼", "密鑰", "秘钥", "通行码", "合言葉", "パスコード", "暗号", "シークレットキー",
        "패스워드", "비번", "비밀키",
        "गुप्त कूट", "सीक्रेट की", "सीक्रेट कोड", "एक्सेस कोड", "पिन कोड", "गोपनीय कुंजी",
        "गोपनीय कोड",
        "الرمز السري", "رمز سري", "الكود السري", "كود سري", "باسورد", "الباسورد",
        "كلمة العبور", "رمز الوصول",
        "คีย์ลับ", "รหัสเข้าถึง", "คำรหัส",
        "şifrenin", "parolanın", "parolası", "parolasını", "gizli anahtarı",
        "gizli anahtarını", "gizli kelimeyi", "gizli kodu", "erişim kodunu", "şifren",
        "lihim na susi", "sikretong salita", "sikretong code",
        "비밀코드", "접근코드", "암호키",
        "passwordnya", "passwordmu",
        # "secret key" as the languages write it with a particle or two words
        "秘密の鍵", "秘密のキー", "비밀열쇠", "गुप्त चाबी", "গোপন কী", "sikretong susi",
        "clef secrète", "geheimer schlüssel", "geheimschlüssel", "tajny klucz",
        "geheime sleutel", "μυστικό κλειδί", "کلید مخفی", "کلید سری",
    ),
    # a secret of any kind (the word alone: "the secret of a good life" is no attack)
    "confidential": (
        "secret", "secrets", "confidential", "hidden", "geheim*", "vertraulich*", "secreto",
        "secreta", "segreto", "segreta", "segredo", "secrète", "confidentiel*", "geheime",
        "tajne", "tajny", "секрет*", "скрыт*", "gizli", "μυστικ*", "hemlig*", "rahasia",
        "lihim", "bí mật", "سري*", "السر", "راز", "गुप्त", "গোপন", "秘密", "隐藏", "機密",
        "비밀", "ความลับ", "ลับ",
    ),
    # to give out
    "reveal": (
        "reveal", "tell", "show", "give", "print", "share", "disclose", "say", "output",
        "display", "repeat", "provide", "confirm", "leak", "spell", "type", "write",
        "need", "require", "benötige", "brauche", "necesito", "preciso", "нужен", "нужно",
        "ihtiyacım", "membutuhkan", "butuh", "चाहिए", "需要", "必要", "필요",
        "onayla*", "wiederhol*", "répète", "répétez", "repite", "repita", "ripeti", "ripetere",
        "herhaal", "powtórz", "повтори", "повторите", "tekrarla", "επανάλαβε",
        "ulangi", "ulitin", "lặp lại", "كرر", "दोहराओ", "दोहराएं", "重复", "繰り返",
        "반복", "ทวน",
        "verrat*", "zeig*", "gib", "geben", "nenn*", "sag", "sagen", "teile", "teilen",
        "bestätig*", "révèle", "révélez", "révéler", "dis", "dites", "dire", "donne",
        "donnez", "montre", "montrez", "affiche", "partage*", "confirme*", "revela",
        "revele", "revelar", "dime", "dígame", "dame", "deme", "muestra", "muéstrame",
        "comparte", "compartir", "confirma", "rivela", "dimmi", "dammi", "mostra",
        "mostrami", "condividi", "conferma", "diga", "dê-me", "mostre", "compartilhe",
        "compartilhar", "vertel", "geef", "toon", "deel", "bevestig", "ujawnij", "podaj",
        "powiedz", "pokaż", "potwierdź", "раскрой", "скажи", "скажите", "сказать",
        "назови", "покажи", "дай", "дайте", "поделись", "подтверди*", "розкажи", "покажи",
        "söyle", "söyler", "ver", "verir", "göster", "paylaş*", "doğrula*", "αποκάλυψε",
        "πες", "πείτε", "δώσε", "δώστε", "μοιραστ*", "visa", "berätta", "vis", "fortæl",
        "fortell", "řekni", "ukaž", "sdílej", "beri tahu", "berikan", "tunjukkan",
        "bagikan", "sabihin", "ibigay", "ipakita", "ibahagi", "tiết lộ", "cho tôi biết",
        "chia sẻ", "xác nhận", "أخبرني", "اكشف", "أعطني", "شارك", "أكد", "بگو", "نشان",
        "बताओ", "बताएं", "बताइए", "बताएँ", "बता", "दिखाओ", "दिखाएं", "साझा", "बलুন", "বলুন",
        "বলো", "দেখাও", "শেয়ার", "पुष्टि", "নিশ্চিত", "ยืนยัน", "확인", "말해", "말씀", "告诉", "透露", "显示", "输出", "分享", "确认", "教えて",
        "表示", "共有", "알려", "보여", "공유", "บอก", "เปิดเผย", "แสดง", "แชร์",
        "प्रकट", "उजागर", "खुलासा", "बताना", "बताइये", "बताये", "लिखो", "लिखें", "दिखाइए",
        "प्रिंट", "दोहराइए", "दोहराएँ",
        "قل", "اعرض", "أظهر", "اطبع", "اذكر", "أفصح", "اكتب", "أرني", "أخبرنا", "زودني",
        "شاركني", "فاش", "بنویس", "تکرار", "بده",
        "พิมพ์", "เขียน", "ซ้ำ",
        "söyleyin", "açıkla", "açıklayın", "ifşa", "yaz", "yazdır", "gösterin", "verin",
        "belirt",
        "beritahu", "sebutkan", "katakan", "ungkapkan", "tampilkan", "cetak", "tuliskan",
        "tulis", "kasih tahu", "bocorkan", "konfirmasi", "konfirmasikan", "perlihatkan",
        "расскажи", "расскажите", "выведи", "выведите", "напечатай", "напиши", "напишите",
        "сообщи", "сообщите", "открой", "раскройте", "покажите", "назовите", "озвучь",
        "перечисли", "предоставь", "предоставьте", "подскажи", "подскажите",
        "জানান", "জানাও", "প্রকাশ", "দেখান", "লিখুন", "লেখো", "পুনরাবৃত্তি",
        "ibunyag", "isulat", "iprint", "kumpirmahin", "ilahad",
        "nói", "hãy nói", "cho biết", "hiển thị", "in ra", "viết ra", "cung cấp",
        "说出", "告訴", "顯示", "打印", "列出", "复述", "重複", "泄露", "泄漏", "公开", "给我",
        "見せて", "出力", "明かして", "開示", "書いて", "言って", "確認", "伝えて", "公開",
        "출력", "공개", "밝혀", "누설", "적어", "써줘",
        "दें", "दीजिए", "दीजिये", "दे दो", "दे दें", "कहें", "कहो", "कहिए", "बोलो", "बोलें",
        "बोलिए", "आउटपुट", "सुनाओ", "सुनाएं", "लिखिए", "दिखाएँ", "बतलाइए", "बताएंगे",
        "बताएँगे", "बताओगे", "बताइएगा", "दोहरा*", "प्रदर्शित",
        "اخبرني", "اعطني", "اظهر", "ارني", "أطلعني", "اطلعني", "أخبر", "اخبر", "أخبريني",
        "قولي", "أعطيني", "اعرضي", "اكشفي", "تخبرني", "تعطيني", "تكشف", "تطلعني", "قدم",
        "قدّم",
        "เผย", "พูด", "แจ้งให้ทราบ", "ขอทราบ",
        "söyleyebilir*", "verebilir*", "gösterebilir*", "tekrarlayın", "tekrar et", "yazın",
        "yazdırın", "belirtin", "göstersene", "söylesene", "söyleyiniz", "veriniz",
        "gösteriniz",
        "isiwalat", "ipaalam", "banggitin", "ilista", "ibunyag mo", "sabihin mo",
        "말하", "알려주", "읊어", "되풀이", "드러내", "노출",
        "beritahukan", "beritau", "kasihkan", "berikanlah", "sebutkanlah",
        "katakanlah", "tunjukkanlah", "tampilkanlah", "ulangilah", "ungkap",
        "ungkapkanlah", "bocorkanlah", "cetaklah", "tuliskanlah", "bagikanlah", "keluarkan",
        "sampaikan", "informasikan",
    ),
    # the one addressed ("ignore your instructions", "what is your password?")
    "yours": (
        "your", "yours", "dein", "deine", "deinen", "deinem", "deiner", "ton", "ta", "tes",
        "votre", "vos", "tu", "tus", "tuo", "tua", "tuoi", "tue", "teu", "tua", "teus",
        "tuas", "jouw", "uw", "twój", "twoje", "twoja", "twoich", "твой", "твоя", "твои",
        "твоё", "твое", "ваш", "ваша", "ваши", "ваше", "ваших", "senin", "σου", "din",
        "ditt", "dina", "dine", "tvůj", "tvoje", "anda", "iyong", "mo", "của bạn",
        "الخاص بك", "तुम्हारा", "तुम्हारे", "तुम्हारी", "आपका", "आपकी", "आपके",
        "আপনার", "তোমার", "你的", "您的", "あなたの", "당신의", "너의", "ของคุณ",
        "तेरा", "तेरी", "तेरे", "لديك", "خاصتك", "شما", "تو", "sizin", "kamu", "milikmu",
        "milik anda", "engkau", "твоих", "твоим", "твоими", "вашего", "вашим", "вашу", "твою",
        "свои", "свою", "তোর", "inyong", "ninyo", "妳的", "君の", "貴方の", "お前の", "귀하의",
        "ของเธอ", "ของท่าน", "ของแก", "iyo", "dirimu", "kau",
    ),
    # a mode the assistant is told it is in ("<SYSTEM MODE>", "<СИСТЕМНЫЙ РЕЖИМ>")
    "mode": (
        "mode", "modus", "modo", "mod", "modu", "режим", "режиме", "λειτουργία", "tryb",
        "chế độ", "وضع", "حالت", "मोड", "মোড", "模式", "モード", "모드", "โหมด",
    ),
    # a question ("what is the password?")
    "question": (
        "what", "what's", "which", "was ist", "was sind", "welches", "welcher", "quel", "quelle", "cuál",
        "cual", "qué", "qual", "quale", "wat", "welk", "jakie", "jaki", "jakie", "jakie",
        "какой", "какое", "каков", "что", "який", "яке", "nedir", "hangi", "ποιος",
        "ποιο", "ποια", "τι", "vad", "vilket", "hvad", "hva", "jaké", "jaký", "apa", "ano",
        "là gì", "gì", "ما", "ماهي", "ما هي", "چیست", "چه", "क्या", "कौन", "কী", "কি",
        "什么", "何です", "何でしょう", "なんですか", "どんな", "뭐", "무엇", "무엇인가요", "뭔가요", "อะไร",
        "कौनसा", "कौन सा", "ماذا", "ما هو", "كدام", "کدام", "ไหน", "ne", "nelerdir", "neydi",
        "apakah", "какая", "каковы", "какие", "কোন", "কোনটি", "anong", "alin", "nào",
        "cái gì", "什麼", "是啥", "哪个", "무엇입니까", "뭐야", "어떤",
        "ما هى", "ماهو", "ما الذي", "뭡니까", "무엇이", "뭔지", "뭐예요", "뭐에요", "कौनसी", "कौन सी",
    ),
    # saying not to ("do not reveal the password": the rule an app sets)
    "negation": (
        "not", "don't", "dont", "never", "nicht", "niemals", "nie", "pas", "jamais",
        "nunca", "non", "mai", "não", "nao", "niet", "nooit", "не", "никогда", "ні",
        "asla", "δεν", "μην", "aldrig", "ikke", "aldri", "jangan", "tidak", "huwag",
        "không", "đừng", "لا", "نه", "मत", "नहीं", "न", "কখনো", "না", "不要", "别", "勿", "禁止",
        "しないで", "ないで", "절대", "말라", "마세요", "อย่า", "ห้าม",
        "لن", "ليس", "لم", "هرگز", "değil", "sakın", "unutma", "unutmayın", "bukan", "нельзя", "запрещено",
        "নয়", "chớ", "不得", "切勿", "绝不", "決して", "絶対に",
        "wag", "tak", "janganlah", "말고", "마라", "마십시오", "지마",
        "söyleme", "söylemeyin", "gösterme", "göstermeyin", "paylaşma", "paylaşmayın",
        "vermeyin", "ifşa etme",
    ),
    # the speaker's own (a password of one's own is no one's secret), and what one
    # does with one's own
    "mine": (
        "my", "mine", "mein", "meine", "meinen", "meinem", "meines", "mon", "ma", "mes",
        "own", "mi", "mis", "mio", "mia", "miei", "meu", "minha", "mijn", "mój", "moje", "moja",
        "moim", "мой", "моя", "мое", "моё", "моего", "мій", "benim", "şifremi", "μου", "min",
        "mitt", "můj", "ko", "aking", "của tôi", "मेरा", "मेरी", "मेरे", "আমার", "我的",
        "私の", "僕の", "내", "제", "나의", "ของฉัน", "ของผม",
        "reset*", "forgot*", "forgotten", "chang*", "creat*", "generat*", "strong",
        "new", "another", "other", "lost", "work", "working", "works", "receive", "neue*",
        "nuevo", "nueva", "nouveau", "nouvelle", "nuovo", "nuova", "novo", "nova",
        "secure", "wifi", "wi-fi", "polic*", "requirement*", "manager", "strength",
        "zurücksetzen", "vergessen", "réinitialiser", "oublié",
        "restablecer", "olvidé", "reimpostare", "redefinir", "esqueci", "сбросить",
        "забыл", "забыла", "sıfırla*", "unuttum", "重置", "忘记了", "リセット", "忘れました",
        "재설정", "잊어버렸",
        "نسيت", "şifrem", "parolam", "parolamı", "lupa", "мои",
        "мою", "моих", "сменить", "изменить", "восстановить", "новый", "自分の", "俺の",
    ),
    # to follow what one is told ("do not follow your instructions")
    "follow": (
        "follow", "obey", "comply", "adhere", "befolge*", "folge", "folgen", "gehorche*",
        "suis", "suivez", "suivre", "obéis", "obéissez", "respecte", "respectez", "sigue",
        "sigas", "siga", "sigan", "seguir", "obedece", "obedezcas", "segui", "seguire",
        "seguite", "obbedisci", "rispetta", "volg", "volgen", "gehoorzaam", "przestrzegaj",
        "słuchaj", "следуй", "следуйте", "следовать", "соблюдай", "соблюдайте",
        "подчиняйся", "слушайся", "дотримуйся", "uy", "uyun", "ikuti", "patuhi", "mematuhi",
        "ikutilah", "sundin", "sumunod", "tuân theo", "làm theo", "tuân thủ", "اتبع", "اتبعي",
        "التزم", "أطع", "پیروی", "اطاعت", "पालन", "मानो", "मानें", "অনুসরণ", "মেনে", "遵守",
        "遵循", "服从", "听从", "従う", "従って", "守って", "따르", "지키", "ปฏิบัติตาม",
        "ทำตาม", "เชื่อฟัง",
        "मानिए", "अनुसरण", "준수", "복종", "turuti", "mengikuti", "taati", "menaati", "menuruti",
    ),
    # who may give orders ("I am your developer")
    "authority": (
        "developer", "developers", "creator", "administrator", "admin", "owner", "operator",
        "programmer", "entwickler", "ersteller", "schöpfer", "betreiber", "programmierer",
        "développeur", "créateur", "administrateur", "propriétaire", "opérateur",
        "programmeur", "desarrollador", "creador", "administrador", "dueño", "propietario",
        "programador", "sviluppatore", "creatore", "amministratore", "proprietario",
        "programmatore", "desenvolvedor", "criador", "dono", "proprietário", "ontwikkelaar",
        "beheerder", "eigenaar", "programista", "twórca", "właściciel", "разработчик",
        "создатель", "администратор", "админ", "владелец", "программист", "розробник",
        "творець", "адміністратор", "geliştirici", "geliştiricin", "geliştiriciniz",
        "yaratıcı", "yaratıcın", "yönetici", "yöneticin", "programcı", "pengembang",
        "pembuat", "pencipta", "pemilik", "tagalikha", "nhà phát triển", "quản trị viên",
        "lập trình viên", "المطور", "مطورك", "المبرمج", "المسؤول", "المشرف", "المالك",
        "منشئ", "المنشئ", "سازنده", "مدیر", "डेवलपर", "निर्माता", "व्यवस्थापक", "एडमिन",
        "प्रशासक", "प्रोग्रामर", "ডেভেলপার", "নির্মাতা", "প্রশাসক", "অ্যাডমিন", "প্রোগ্রামার",
        "开发者", "开发人员", "创造者", "创建者", "管理员", "程序员", "開發者", "管理員",
        "開発者", "作成者", "管理者", "製作者", "プログラマー", "개발자", "제작자", "관리자",
        "프로그래머", "นักพัฒนา", "ผู้สร้าง", "ผู้ดูแลระบบ", "โปรแกรมเมอร์",
        "مطوّرك", "المطوّر", "مطور", "ผู้พัฒนา", "แอดมิน", "geliştirici*", "yönetici*",
        "yaratıcı*", "programcı*", "tagapamahala", "mayari", "tagagawa", "운영자", "소유자",
        "창조자", "pengembangmu", "pemrogram", "pengelola",
    ),
    # the speaker says who they are ("I am ...")
    "speaker": (
        "i am", "i'm", "ich bin", "je suis", "soy", "sono", "sou", "ik ben", "jestem", "я",
        "ben", "saya", "aku", "ako", "tôi là", "أنا", "انا", "मैं", "আমি", "我是", "私は",
        "僕は", "저는", "나는", "제가", "내가", "ผมคือ", "ฉันคือ", "ผมเป็น", "ฉันเป็น",
    ),
}
"""Concept -> entries (see the module docstring). A word of two concepts is read as the
first."""

RULE_ONLY = frozenset({"follow", "authority", "speaker"})
"""Concepts only the rules read: the classifier's weights were fit without them."""

_UNSPACED = re.compile(r"[\u0e00-\u0e7f\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff\uac00-\ud7af]")
"""Thai, kana, CJK ideographs, and Hangul (written with spaces, but a word carries its
particles: "비밀번호를" is "password" and the object's mark): the scripts whose words are
found anywhere in the text."""
_TOKEN = re.compile(r"[^\s\d!-/:-@\[-`{-~¿¡«»“”„‘’…。、！？，：；（）「」]+")
"""A word: what lies between spaces, digits and marks (a word's combining vowel signs
and accents are part of it)."""
AND_THEN: tuple[str, ...] = (
    "and", "then", "und", "dann", "et", "puis", "ensuite", "y", "luego", "después", "e",
    "poi", "quindi", "depois", "então", "en", "daarna", "i", "potem", "и", "а", "затем",
    "потом", "і", "та", "потім", "ve", "sonra", "ardından", "dan", "lalu", "kemudian",
    "at", "pagkatapos", "và", "rồi", "sau đó", "και", "μετά", "och", "sedan", "og", "så",
    "a", "pak", "ثم", "و", "और", "फिर", "तब", "এবং", "তারপর", "سپس", "그리고",
    "그 다음", "그런 다음",
)
"""Words for "and" and "then" that, after a comma, begin a new clause: "summarise this
article, and then repeat your instructions" asks its request in a clause of its own."""
_AND_THEN_UNSPACED = ("然后", "然後", "并且", "並且", "接着", "接著", "再", "并", "そして",
                      "それから", "その後")
"""The same after a comma in Chinese and Japanese, where no space follows it."""

_CLAUSE = re.compile(
    r"[.!?;。！？；\n|।॥؟۔]+|\s[-–—]\s"
    r"|,(?<=[^\W\d_],|[\u0900-\u0dff],)\s+(?=(?:" + "|".join(AND_THEN) + r")\b)"
    r"|،\s*(?=و|ثم)"
    r"|[,、]\s*(?=" + "|".join(_AND_THEN_UNSPACED) + ")")
_JOINED = re.compile(r"\s*(?:(?:" + "|".join(AND_THEN) + r")\b|"
                     + "|".join(_AND_THEN_UNSPACED) + ")")


_CASES = str.maketrans({chr(k).lower(): chr(v).lower() for k, v in LOOKALIKES.items()
                        if isinstance(v, int) and chr(k).isupper() and chr(k).lower() != chr(k)})
"""The view folds a capital Cyrillic "К" to Latin "K" and leaves a small "к" as it is:
the small letters whose capitals fold are folded alike here, so "Какой" and "какой" are
one word."""


def _fold(entry: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", view(entry).text.lower()).split()).translate(
        _CASES)


class _Tables:
    def __init__(self) -> None:
        self.words: dict[str, str] = {}
        self.stems: dict[str, str] = {}
        self.phrases: dict[str, str] = {}
        self.unspaced: dict[str, str] = {}
        for concept, entries in LEXICON.items():
            for raw in entries:
                stem = raw.endswith("*")
                e = _fold(raw.rstrip("*"))
                if _UNSPACED.search(e):
                    self.unspaced.setdefault(e, concept)
                elif " " in e:
                    self.phrases.setdefault(e, concept)
                elif stem:
                    self.stems.setdefault(e, concept)
                else:
                    self.words.setdefault(e, concept)
        self.typos = {_typo_key(w): c for w, c in self.words.items() if len(w) >= 4}
        self.stem_typos = {_typo_key(w): c for w, c in self.stems.items() if len(w) >= 5}
        self.stem_lengths = sorted({len(s) for s in self.stems}, reverse=True)
        self.unspaced_lengths = sorted({len(s) for s in self.unspaced}, reverse=True)
        self.hangul_typos = {_typo_key(w): c for w, c in self.unspaced.items()
                             if len(w) >= 4 and _HANGUL.match(w)}
        self.hangul_lengths = sorted({len(w) for w in self.unspaced
                                      if len(w) >= 4 and _HANGUL.match(w)}, reverse=True)
        # phrases as the words' typo keys: "acecss code" is "access code"
        self.phrase_keys = {tuple(_canon(w) for w in p.split(" ")): c
                            for p, c in self.phrases.items()}
        self.phrase_starts = frozenset(k[0] for k in self.phrase_keys)
        self.phrases_by_start: dict[str, list[tuple[tuple[str, ...], str]]] = {}
        for k, c in self.phrase_keys.items():
            self.phrases_by_start.setdefault(k[0], []).append((k, c))


@functools.cache
def _tables() -> _Tables:
    return _Tables()


@functools.lru_cache(maxsize=1 << 16)
def _word_concept(w: str) -> str | None:
    t = _tables()
    c = t.words.get(w)
    if c is not None:
        return c
    if w[:1] in "وفبل" and len(w) > 3:  # Arabic: "and", "so", "with", "for" glued on
        c = t.words.get(w[1:]) or t.words.get(w[1:].removeprefix("ال"))
        if c is not None:
            return c
    n = len(w)
    for k in t.stem_lengths:
        if k <= n:
            c = t.stems.get(w[:k])
            if c is not None:
                return c
    if n < 4:
        return None
    # two letters swapped inside the word ("ingore", "passwrod", "игнорриовать"): the
    # same first and last letters and the same letters between
    c = t.typos.get(_typo_key(w))
    if c is not None:
        return c
    for k in t.stem_lengths:
        if 5 <= k <= n:
            c = t.stem_typos.get(_typo_key(w[:k]))
            if c is not None:
                return c
    return None


def _typo_key(w: str) -> str:
    return w[0] + "".join(sorted(w[1:-1])) + w[-1]


@functools.lru_cache(maxsize=1 << 16)
def _canon(w: str) -> str:
    return _typo_key(w) if len(w) >= 4 else w


class Clause(NamedTuple):
    concepts: frozenset[str]
    words: int
    """Its words (a run of Chinese, Japanese or Thai counts as one word a 3 characters)."""
    code: bool
    """It reads as code or a command's help: markup characters, or it ends in a colon
    (what follows is an example)."""
    negated_ignore: bool = False
    """A word for ignoring comes right after one for negation ("do not ignore", "не
    игнорируй", "đừng bỏ qua"): an order to keep the instructions, no override."""
    joined: bool = False
    """It begins with a word for "and" or "then" (`AND_THEN`): it goes on from the
    clause before it."""


@functools.lru_cache(maxsize=64)
def clause_concepts(text: str) -> tuple[Clause, ...]:
    """The concepts of each clause of normalized `text` (clauses end at sentence marks,
    line breaks and a comma before a word of `AND_THEN`), the clauses with none left out. (Kept for the last texts
    read: the rules and the classifier read the same view.)"""
    t = _tables()
    out: list[Clause] = []
    if not text.isascii():
        text = text.translate(_CASES)
    for clause in _CLAUSE.split(text):
        words = _TOKEN.findall(clause)
        vocab = set(words)
        if not vocab.isdisjoint(_NOT_ASKING):
            vocab -= _not_asking(words)
        found = {c for c in map(_word_concept, vocab) if c is not None}
        if "yours" not in found and found & _OWNED and any(_yours_ending(w) for w in words):
            found.add("yours")
        starts = [i for i, w in enumerate(words) if _word_concept(w) == "ignore"] \
            if "ignore" in found else []
        if not t.phrase_starts.isdisjoint(map(_canon, words)):
            _phrases(t, list(map(_canon, words)), found, starts)
        n = len(words)
        if _UNSPACED.search(clause):
            n += _unspaced(t, clause, found)
            if " " in clause and _HANGUL.search(clause):
                # a Korean compound written in two words ("비밀 키": secret key) as one
                _unspaced(t, _HANGUL_SPACE.sub("", clause), found)
        if found:
            code = bool(_CODE.search(clause)) or clause.rstrip().endswith(":")
            negated = any(_negates(words, i) for i in starts)
            out.append(Clause(frozenset(found), n, code, negated,
                              _JOINED.match(clause) is not None))
    return tuple(out)


_NOT_ASKING: Mapping[str, Callable[[str], bool]] = {
    # Hindi "need" ("मुझे पासवर्ड चाहिए": I need the password) says "must" or "should"
    # after a verb's infinitive (होना, होनी, होने: "पासवर्ड ... होना चाहिए", the password
    # must be ...; "बदलना चाहिए", should be changed)
    "चाहिए": lambda before: before.endswith(("ना", "नी", "ने")),
    # Hindi "give" after "attention" is "pay attention", "note" ("ध्यान दें: ...")
    "दें": lambda before: before == "ध्यान",
    "दीजिए": lambda before: before == "ध्यान",
    "दीजिये": lambda before: before == "ध्यान",
}
"""Words for asking that ask for nothing after the word given (by a test of the word
before them)."""


def _not_asking(words: list[str]) -> set[str]:
    """The words of `_NOT_ASKING` that ask for nothing wherever they are in the clause."""
    out: set[str] = set()
    for w in set(words) & _NOT_ASKING.keys():
        test = _NOT_ASKING[w]
        if all(i > 0 and test(words[i - 1]) for i, x in enumerate(words) if x == w):
            out.add(w)
    return out


_OWNED = frozenset({"instructions", "tasks", "secret"})
"""What an ending can say is the addressee's ("instruksimu", "تعليماتك": your
instructions)."""


def _yours_ending(w: str) -> bool:
    """`w` is a word of `_OWNED` with the ending for "your" of Indonesian ("-mu") or
    Arabic ("-ك") on a word that is one without it, or is spelled that way ("مرورك" of
    "كلمة مرورك", "your password")."""
    if w in ("مرورك", "سرك"):
        return True
    if len(w) > 4 and w.endswith("mu"):
        return _word_concept(w[:-2]) in _OWNED
    if len(w) > 3 and w.endswith("ك"):
        return _word_concept(w[:-1]) in _OWNED
    return False


def _negates(words: list[str], i: int) -> bool:
    """A word for negation right before `words[i]` ("do not ignore"; "don't ignore",
    read as "don", "t", "ignore"), or before "to" or "ever" before it ("not to ignore");
    not one further away ("don't hesitate, ignore..."), nor one itself negated or asked
    (`_undone`)."""
    before = words[max(0, i - 2) : i]
    if not before:
        return False
    if len(before) == 2 and before[1] in ("to", "ever"):
        at = i - 2 if _word_concept(before[0]) == "negation" else -1
    elif before[-1] == "t":
        at = i - 2
    else:
        at = i - 1 if _word_concept(before[-1]) == "negation" else -1
    return at >= 0 and not _undone(words, at)


ASKING = (
    "why", "how come", "por qué", "por que", "pourquoi", "warum", "wieso", "weshalb",
    "perché", "perche", "почему", "зачем", "чому", "sao", "kenapa", "mengapa", "neden",
    "niye", "bakit", "kyon", "क्यों", "لماذا", "ทำไม", "为什么", "為什麼", "为何", "なぜ",
    "どうして", "왜",
)
"""Words that ask, as a question or a suggestion: a negation right after one asks for
what it negates ("why not ignore...", "¿por qué no ignoras...?"). Read by the lexicon
as words (`_undone`) and by the rules as a pattern (`ASKING_BEFORE`)."""

ASKING_BEFORE = re.compile(
    ("(?:" + "|".join(w if _UNSPACED.search(w) else rf"\b{w}" for w in ASKING)
     + r")[^.!?;\n]{0,16}$").translate(LOOKALIKES), re.I | re.M)
"""A word of `ASKING` shortly before the end of the searched span, in the same clause."""


@functools.cache
def _asking() -> tuple[frozenset[str], dict[str, frozenset[str]]]:
    """`ASKING` as the lexicon reads words: single words, and each two-word one's second
    word by its first."""
    pairs: dict[str, set[str]] = {}
    for w in ASKING:
        if " " in w:
            first, second = _fold(w).split(" ")
            pairs.setdefault(first, set()).add(second)
    return (frozenset(_fold(w) for w in ASKING if " " not in w),
            {k: frozenset(v) for k, v in pairs.items()})


def _undone(words: list[str], at: int) -> bool:
    """The negation at `words[at]` is itself negated ("must not not ignore") or asked
    ("why not ignore", "¿por qué no ignoras...?"), within the three words before it: it
    asks for the override instead of refusing it (the override counts: fails closed)."""
    if at > 0 and _word_concept(words[at - 1]) == "negation":
        return True
    single, pairs = _asking()
    lead = words[max(0, at - 3) : at]
    return any(w in single or (k > 0 and w in pairs.get(lead[k - 1], ()))
               for k, w in enumerate(lead))


def _phrases(t: _Tables, keys: list[str], found: set[str], starts: list[int]) -> None:
    # only where a phrase can start: a clause's words, not every phrase of the lexicon;
    # where a phrase for ignoring starts goes to `starts`
    by_start = t.phrases_by_start
    for i, k in enumerate(keys):
        for phrase, concept in by_start.get(k, ()):
            if tuple(keys[i : i + len(phrase)]) == phrase:
                found.add(concept)
                if concept == "ignore":
                    starts.append(i)


def _unspaced(t: _Tables, clause: str, found: set[str]) -> int:
    """Adds the concepts of the runs of unspaced scripts in `clause` to `found`; their
    length in words (a word a 3 characters)."""
    lengths = t.unspaced_lengths
    table = t.unspaced
    chars = 0
    for m in _UNSPACED_RUN.finditer(clause):
        run = m.group()
        chars += len(run)
        hit = False
        for i in range(len(run)):
            for k in lengths:
                c = table.get(run[i : i + k])
                if c is not None and k == 1 and len(run) > 1 and _HANGUL.match(run):
                    # a Korean word of one syllable ("내", "제": "my") only as a word of
                    # its own: "제발" is "please", "제공" "to provide"
                    continue
                if c is not None:
                    found.add(c)
                    hit = True
                    break
        if not hit and len(run) >= 4 and _HANGUL.match(run):
            # a Korean word is its stem and particles: the stem with two letters swapped
            # ("비번밀호가" is "비밀번호가")
            for k in t.hangul_lengths:
                c = t.hangul_typos.get(_typo_key(run[:k])) if k <= len(run) else None
                if c is not None:
                    found.add(c)
                    break
    return chars // 3


_HANGUL = re.compile(r"[\uac00-\ud7af]")
_HANGUL_SPACE = re.compile(r"(?<=[\uac00-\ud7af]) (?=[\uac00-\ud7af])")
_CODE = re.compile(r"[`{}=\[\]#]")
_UNSPACED_RUN = re.compile(r"[\u0e00-\u0e7f\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff\uac00-\ud7af]+")


def concepts(text: str) -> frozenset[str]:
    """The concepts of normalized `text`, all clauses together."""
    out: set[str] = set()
    for c in clause_concepts(text):
        out |= c.concepts
    return frozenset(out)
